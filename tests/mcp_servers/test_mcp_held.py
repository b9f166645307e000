"""A stdio MCP server runs under the reaper (``tools/held.py``), as a Bash command does: what
it starts ends with it, at its session's end, however it hides (a session of its own, an
empty environment), with the sandbox or without; its stdin and stdout pass through (the
session works). A real server (``mcp_server_app.py --daemon``); what still runs is read
from /proc (``marked``: by a mark, not a pid)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import polling
from marked import kill_marked, marked, new_mark
from subagents.definitions.spec import AgentSpec
from subagents.mcp import McpHub, parse_servers
from subagents.tools.sandbox import Sandbox
from subagents.tools.sandbox_exec import kernel_abi

from .conftest import SERVER_APP, START_WAIT_S

WAIT = 120.0
"""A hang guard, not a timing: each wait returns as soon as its condition holds."""
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


DEAF_SERVER = """
import signal, subprocess, sys, time
mark, ready = sys.argv[1], sys.argv[2]
subprocess.Popen(
    ["setsid", "env", "-i", "/bin/sh", "-c", f"echo ready > {ready}; exec sleep {mark}"],
    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
while True:  # never answers, and outlives its stdin's end and SIGTERM
    time.sleep(60)
"""

HOST = """
import sys
from subagents.definitions.spec import AgentSpec
from subagents.mcp import McpHub, parse_servers
config = {"command": sys.executable, "args": sys.argv[1:]}
hub = McpHub(parse_servers({"deaf": config}), start_timeout=600.0)
hub.tools_for(AgentSpec(name="worker", description="d"))  # waits for a server that never answers
"""


@pytest.mark.timeout(400)  # (a hang guard: its waits' guards, each WAIT, say what failed)
def test_a_deaf_servers_daemon_ends_when_the_runtime_is_killed(tmp_path: Path) -> None:
    """The runtime SIGKILLed while its server starts: the server neither answers nor ends at
    its stdin's end nor at SIGTERM, and its daemon hides; the reaper's lifeline (the status
    FIFO's read end, the runtime's alone, closed by its death) ends them all."""
    mark, ready = new_mark(), tmp_path / "ready"
    server = tmp_path / "deaf.py"
    server.write_text(DEAF_SERVER, encoding="utf-8")
    host = subprocess.Popen(
        [sys.executable, "-c", HOST, str(server), mark, str(ready)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        polling.wait_until(
            lambda: bool(marked(mark, exactly=True)), "the deaf server's daemon", WAIT
        )
        host.kill()
        host.wait(WAIT)
        polling.wait_until(lambda: marked(mark) == [], "every marked process ended", WAIT)
    finally:
        host.kill()
        host.wait(WAIT)
        kill_marked(mark)
