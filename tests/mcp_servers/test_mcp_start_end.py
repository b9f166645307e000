"""A stdio server that ends before answering initialize: the error says how it ended, as its
reaper saw it (``held.how_it_ended``): an exit status, the signal that killed it, or that its
launcher itself ended without saying (killed). Without it, a server killed by a signal (no
stderr) read only "it exited before answering initialize" (session 29's CI red), and nobody
could tell a crash from a kill. Real servers, with the sandbox (its PID namespace's init is
the reaper) and without, with the reaper the runtime's child and detached (a node host's)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from subagents.definitions.spec import AgentSpec
from subagents.mcp import McpHub, parse_servers
from subagents.tools import detached
from subagents.tools.processes import HOLDS
from subagents.tools.sandbox import Sandbox
from subagents.tools.sandbox_exec import kernel_abi

from .conftest import START_WAIT_S

pytestmark = pytest.mark.skipif(not HOLDS, reason="no reaper here: nothing says how it ended")
landlock = pytest.mark.skipif(kernel_abi() < 4, reason="the kernel offers no Landlock ABI 4+")

QUIET_EXIT = "import sys\nsys.exit(3)\n"
KILLS_ITSELF = "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n"
KILLS_ITS_REAPER = (
    "import os, signal, time\nos.kill(os.getppid(), signal.SIGKILL)\ntime.sleep(60)\n"
)
"""Unsandboxed only: the reaper is the server's parent (in the sandbox it is out of the
server's reach: its Landlock scope, and a PID namespace's init takes no SIGKILL from inside)."""


def failure(tmp_path: Path, script: str, *, sandboxed: bool, detaching: bool = False) -> str:
    """Why a server running ``script`` could not start."""
    (tmp_path / "server.py").write_text(script, encoding="utf-8")
    servers = parse_servers(
        {"srv": {"command": sys.executable, "args": [str(tmp_path / "server.py")]}}
    )
    sandbox = (
        Sandbox.coerce(Sandbox()).for_run(workspace=tmp_path, read_only=False, network=True)
        if sandboxed
        else None
    )
    was = detached._ALLOWED[0]
    detached._ALLOWED[0] = detaching
    try:
        with McpHub(servers, cwd=tmp_path, start_timeout=START_WAIT_S) as hub:
            return hub.tools_for(AgentSpec(name="w", description="d"), sandbox=sandbox).failures[
                "srv"
            ]
    finally:
        detached._ALLOWED[0] = was


@pytest.mark.parametrize("detaching", [False, True], ids=["child", "detached"])
@pytest.mark.parametrize("sandboxed", [False, pytest.param(True, marks=landlock)])
def test_an_exit_status_is_said(tmp_path: Path, sandboxed: bool, detaching: bool) -> None:
    reason = failure(tmp_path, QUIET_EXIT, sandboxed=sandboxed, detaching=detaching)
    assert "it exited before answering initialize (exit status 3)" in reason, reason


@pytest.mark.parametrize("detaching", [False, True], ids=["child", "detached"])
@pytest.mark.parametrize("sandboxed", [False, pytest.param(True, marks=landlock)])
def test_a_kill_is_said(tmp_path: Path, sandboxed: bool, detaching: bool) -> None:
    reason = failure(tmp_path, KILLS_ITSELF, sandboxed=sandboxed, detaching=detaching)
    assert "it exited before answering initialize (killed by SIGKILL)" in reason, reason


def test_a_launcher_killed_first_is_said(tmp_path: Path) -> None:
    reason = failure(tmp_path, KILLS_ITS_REAPER, sandboxed=False)
    assert "(its launcher ended without saying how the server ended: killed itself)" in reason


LINGERS = "import os, time\nos.close(1)\ntime.sleep(60)\n"
"""Closes its output (the session's end, for the SDK) and lingers: the runtime stops it."""


@pytest.mark.parametrize("detaching", [False, True], ids=["child", "detached"])
def test_a_server_the_runtime_stopped_is_said_stopped(tmp_path: Path, detaching: bool) -> None:
    """Its end is the runtime's stop (the SDK's SIGTERM to its launcher; a detached one's,
    ``held.end_detached``), not its own: session 30 said "it exited ... (killed by
    SIGTERM)" (its reaper says ``stopped`` before the end a stop brought: ``reaper.STOPPED``)."""
    reason = failure(tmp_path, LINGERS, sandboxed=False, detaching=detaching)
    expected = "it closed its output before answering initialize (stopped by the runtime"
    assert expected in reason, reason
