"""A real MCP server for the tests, written with the mcp SDK (``MCPServer``), run over stdio.

    python mcp_server_app.py [--name NAME] [--log FILE] [--hold S] [--daemon MARK READY]
        [--http PORT | --sse PORT]

Tools: ``add`` (read-only), ``pid``, ``note`` (appends to ``--log``: a side effect a test can
count), ``peek`` (read-only, logs too), ``slow`` (sleeps; for stops and deadlines), ``fail``
(the tool reports an error), ``crash`` (the process dies in the middle of the call, after
writing to stderr), ``header`` (a request header, over HTTP). Resources: ``notes://readme``
(text) and ``images://dot`` (a PNG). ``--daemon``: at its start the server leaves a daemon
that hides (a session of its own, an empty environment), ``sleep MARK``, which writes READY.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations


def _pid() -> str:
    """``PID NS``: in the sandbox the server runs in a PID namespace of its own
    (tools/reaper_ns.py), where its pid means another process (or none) out here; a test maps
    it with ``ns_pids.outer``."""
    return f"{os.getpid()} {os.readlink('/proc/self/ns/pid')}"


def build(name: str, log: str | None, hold: float = 0.0) -> MCPServer:
    app = MCPServer(name)

    def effect(line: str) -> None:
        """Append ``line`` to the log, write the server's pid to ``marker`` beside it, then
        hold (``--hold``: a crash test kills the client right after the side effect)."""
        if log is None:
            raise ValueError("this server was started without --log")
        with open(log, "a", encoding="utf-8") as handle:
            handle.write(line + "\n")
        with open(os.path.join(os.path.dirname(log), "marker"), "w", encoding="utf-8") as handle:
            handle.write(_pid())
        time.sleep(hold)

    @app.tool(annotations=ToolAnnotations(read_only_hint=True))
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @app.tool(annotations=ToolAnnotations(read_only_hint=True))
    def pid() -> str:
        """The server's process id and its PID namespace (``PID NS``: tests/ns_pids.py)."""
        return _pid()

    @app.tool()
    def note(text: str) -> str:
        """Append a line to the server's log file (a side effect)."""
        effect(text)
        return f"noted: {text}"

    @app.tool(annotations=ToolAnnotations(read_only_hint=True))
    def peek() -> str:
        """Look (marked read-only; it logs 'peek' so a test can count the calls)."""
        effect("peek")
        return "peeked"

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

    @app.tool(annotations=ToolAnnotations(read_only_hint=True))
    def header(name: str, ctx: Context) -> str:
        """A header of the request that called this tool (HTTP transports)."""
        headers = ctx.headers or {}
        return str(headers.get(name.lower(), "(none)"))

    @app.resource("notes://readme", name="readme", description="The notes.", mime_type="text/plain")
    def readme() -> str:
        return f"notes of {name}"

    @app.resource("images://dot", name="dot", mime_type="image/png")
    def dot() -> bytes:
        return DOT_PNG

    return app


DOT_PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16
"""The bytes a PNG starts with: enough for a test of how an image resource comes back."""


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", default="testsrv")
    parser.add_argument("--log", default=None)
    parser.add_argument("--http", type=int, default=None)
    parser.add_argument("--sse", type=int, default=None)
    parser.add_argument("--hold", type=float, default=0.0)
    parser.add_argument("--daemon", nargs=2, default=None, metavar=("MARK", "READY"))
    options = parser.parse_args()
    if options.daemon is not None:
        import subprocess

        mark, ready = options.daemon
        subprocess.Popen(
            ["setsid", "env", "-i", "/bin/sh", "-c", f"echo ready > {ready}; exec sleep {mark}"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        while not os.path.exists(ready):  # started before the server answers
            time.sleep(0.01)
    app = build(options.name, options.log, options.hold)
    if options.http is not None:
        app.run(transport="streamable-http", host="127.0.0.1", port=options.http)
    elif options.sse is not None:
        app.run(transport="sse", host="127.0.0.1", port=options.sse)
    else:
        app.run()
