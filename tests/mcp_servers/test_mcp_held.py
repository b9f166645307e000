"""A stdio MCP server runs under the reaper (``tools/held.py``), as a Bash command does: what
it starts ends with it, at its session's end, however it hides (a session of its own, an
empty environment), with the sandbox or without; its stdin and stdout pass through (the
session works). A real server (``mcp_server_app.py --daemon``); what still runs is read
from /proc (``marked``: by a mark, not a pid)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from marked import kill_marked, marked, new_mark
from subagents.definitions.spec import AgentSpec
from subagents.mcp import McpHub, parse_servers
from subagents.tools.sandbox import Sandbox
from subagents.tools.sandbox_exec import kernel_abi

from .conftest import SERVER_APP, START_WAIT_S

landlock = pytest.mark.skipif(kernel_abi() < 4, reason="the kernel offers no Landlock ABI 4+")


@pytest.mark.parametrize("sandboxed", [False, pytest.param(True, marks=landlock)])
def test_a_servers_hidden_daemon_ends_with_its_session(tmp_path: Path, sandboxed: bool) -> None:
    mark, ready = new_mark(), tmp_path / "ready"
    args = [str(SERVER_APP), "--daemon", mark, str(ready)]
    sandbox = (
        Sandbox.coerce(Sandbox()).for_run(workspace=tmp_path, read_only=False, network=True)
        if sandboxed
        else None
    )
    spec = AgentSpec(name="worker", description="d")
    servers = parse_servers({"srv": {"command": sys.executable, "args": args}})
    hub = McpHub(servers, cwd=tmp_path, start_timeout=START_WAIT_S)
    try:
        run = hub.tools_for(spec, sandbox=sandbox)
        assert hub.call(run, "mcp__srv__add", {"a": 2, "b": 3}).text == "5"  # stdio through
        assert ready.read_text().strip() == "ready"  # the daemon started first
        hub.close()
        assert marked(mark) == []  # the server and its daemon: killed and reaped
    finally:
        hub.close()
        kill_marked(mark)
