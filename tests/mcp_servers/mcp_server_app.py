"""A real MCP server for the tests, written with the mcp SDK (``MCPServer``), run over stdio.

    python mcp_server_app.py [--name NAME] [--log FILE]

Tools: ``add`` (read-only), ``pid``, ``note`` (appends to ``--log``: a side effect a test can
count), ``slow`` (sleeps; for stops and deadlines), ``fail`` (the tool reports an error),
``crash`` (the process dies in the middle of the call, after writing to stderr).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations


def build(name: str, log: str | None) -> MCPServer:
    app = MCPServer(name)

    @app.tool(annotations=ToolAnnotations(read_only_hint=True))
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @app.tool(annotations=ToolAnnotations(read_only_hint=True))
    def pid() -> int:
        """The server's process id."""
        return os.getpid()

    @app.tool()
    def note(text: str) -> str:
        """Append a line to the server's log file (a side effect)."""
        if log is None:
            raise ValueError("this server was started without --log")
        with open(log, "a", encoding="utf-8") as handle:
            handle.write(text + "\n")
        return f"noted: {text}"

    @app.tool(annotations=ToolAnnotations(read_only_hint=True))
    def slow(seconds: float) -> str:
        """Sleep, then answer."""
        time.sleep(seconds)
        return f"slept {seconds}"

    @app.tool()
    def fail(reason: str) -> str:
        """Fail with the given reason."""
        from mcp.server.mcpserver.exceptions import ToolError

        raise ToolError(reason)

    @app.tool()
    def crash() -> str:
        """Die in the middle of the call."""
        print("fatal: the test server was told to crash", file=sys.stderr, flush=True)
        os._exit(3)

    return app


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", default="testsrv")
    parser.add_argument("--log", default=None)
    options = parser.parse_args()
    build(options.name, options.log).run()
