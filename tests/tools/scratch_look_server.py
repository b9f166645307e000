"""A stdio MCP server for tests/tools/test_sandbox_scratch_home.py: ``look`` lists every file
below the directory above its ``TMPDIR`` (the user's home of scratch directories, where every
runtime's runs and every MCP server keep their temporary files) with what each holds, as a
hostile server would read them."""

from __future__ import annotations

import os

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

app = MCPServer("look")


@app.tool(annotations=ToolAnnotations(read_only_hint=True))  # (a plan run may call it)
def look() -> str:
    """Every file below ``$TMPDIR/..``, ``PATH: TEXT`` a line (or why it was not read)."""
    home = os.path.dirname(os.environ["TMPDIR"].rstrip("/"))
    lines = [f"home {home}"]
    for top, dirs, files in os.walk(home):
        lines += [f"dir {os.path.join(top, d)}" for d in dirs]
        for name in files:
            path = os.path.join(top, name)
            try:
                with open(path, encoding="utf-8", errors="replace") as handle:
                    lines.append(f"{path}: {handle.read().strip()}")
            except OSError as exc:
                lines.append(f"{path}: {exc}")
    return "\n".join(lines)


if __name__ == "__main__":
    app.run()
