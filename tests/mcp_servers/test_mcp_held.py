"""A stdio MCP server runs under the reaper (``tools/held.py``), as a Bash command does: what
it starts ends with it, at its session's end, however it hides (a session of its own, an
empty environment), with the sandbox or without; its stdin and stdout pass through (the
session works). A real server (``mcp_server_app.py --daemon``); what still runs is read
from /proc (``marked``: by a mark, not a pid)."""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import sys
import threading
from pathlib import Path

import pytest
import structlog.testing

import polling
from marked import children_of, host_leaves_nothing, kill_marked, marked, new_mark
from subagents.definitions.spec import AgentSpec
from subagents.mcp import McpHub, parse_servers
from subagents.tools import detached
from subagents.tools.processes import ProcessGroups
from subagents.tools.sandbox import RunSandbox, Sandbox
from subagents.tools.sandbox_exec import kernel_abi

from .conftest import SERVER_APP, START_WAIT_S

WAIT = 120.0
"""A hang guard, not a timing: each wait returns as soon as its condition holds."""
landlock = pytest.mark.skipif(kernel_abi() < 4, reason="the kernel offers no Landlock ABI 4+")


@pytest.mark.parametrize("detaching", [False, True], ids=["child", "detached"])
@pytest.mark.parametrize("sandboxed", [False, pytest.param(True, marks=landlock)])
def test_a_servers_hidden_daemon_ends_with_its_session(
    tmp_path: Path, sandboxed: bool, detaching: bool
) -> None:
    """``detached``: as in a cluster's node host, the server's reaper not the runtime's child
    (``tools/detached.py``): its session's end still ends it all."""
    was = detached._ALLOWED[0]
    detached._ALLOWED[0] = detaching
    try:
        _session_ends(tmp_path, sandboxed, detaching)
    finally:
        detached._ALLOWED[0] = was


def daemon_server(tmp_path: Path, sandboxed: bool) -> tuple[str, list[str], RunSandbox | None]:
    """A mark, the arguments of a test server that starts a hidden daemon holding it
    (``mcp_server_app.py --daemon``; ``tmp_path / "ready"`` says it started), and a run's
    sandbox to start it in (None: without)."""
    mark, ready = new_mark(), tmp_path / "ready"
    args = [str(SERVER_APP), "--daemon", mark, str(ready)]
    sandbox = (
        Sandbox.coerce(Sandbox()).for_run(workspace=tmp_path, read_only=False, network=True)
        if sandboxed
        else None
    )
    return mark, args, sandbox


def _session_ends(tmp_path: Path, sandboxed: bool, detaching: bool) -> None:
    mark, args, sandbox = daemon_server(tmp_path, sandboxed)
    spec = AgentSpec(name="worker", description="d")
    servers = parse_servers({"srv": {"command": sys.executable, "args": args}})
    hub = McpHub(servers, cwd=tmp_path, start_timeout=START_WAIT_S)
    try:
        run = hub.tools_for(spec, sandbox=sandbox)
        assert hub.call(run, "mcp__srv__add", {"a": 2, "b": 3}).text == "5"  # stdio through
        assert (tmp_path / "ready").read_text().strip() == "ready"  # the daemon started first
        hub.close(WAIT)  # (its timeout a hang guard: the end is waited for)
        if not detaching:
            assert marked(mark) == []  # the server and its daemon: killed and reaped
        else:  # the reaper, which said all it held is dead (``held.end_detached``), ends after
            assert marked(mark, exactly=True) == []  # the daemon: killed and reaped
            polling.wait_until(lambda: marked(mark) == [], "the detached reaper ended", WAIT)
    finally:
        hub.close()
        kill_marked(mark)


STUBBORN_SERVER = """
import os, signal, subprocess, sys, time
sys.path.insert(0, sys.argv[3])
from mcp_server_app import build
mark, ready = sys.argv[1], sys.argv[2]
subprocess.Popen(
    ["setsid", "env", "-i", "/bin/sh", "-c", f"echo ready > {ready}; exec sleep {mark}"],
    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
)
while not os.path.exists(ready):
    time.sleep(0.01)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
build("srv", None).run()
while True:  # outlives its stdin's end and SIGTERM: its reaper's grace, then its kill, end it
    time.sleep(60)
"""


def test_a_detached_servers_session_end_returns_once_its_daemon_is_dead(tmp_path: Path) -> None:
    """A detached server that outlives its stdin's end and SIGTERM: the session's end stops
    its reaper and waits for all it held (``held.end_detached``). It closed the lifeline
    and returned while the server and its daemon ran (for the reaper's grace at least):
    on a loaded machine the test above saw a server slower than ``SESSION_END_S`` so."""
    mark, ready = new_mark(), tmp_path / "ready"
    server = tmp_path / "stubborn.py"
    server.write_text(STUBBORN_SERVER, encoding="utf-8")
    args = [str(server), mark, str(ready), str(SERVER_APP.parent)]
    servers = parse_servers({"srv": {"command": sys.executable, "args": args}})
    was = detached._ALLOWED[0]
    detached._ALLOWED[0] = True
    hub = McpHub(servers, cwd=tmp_path, start_timeout=START_WAIT_S)
    try:
        run = hub.tools_for(AgentSpec(name="worker", description="d"))
        assert hub.call(run, "mcp__srv__add", {"a": 2, "b": 3}).text == "5"
        assert marked(mark, exactly=True)  # the daemon runs
        hub.close(WAIT)  # (its timeout a hang guard: the end is waited for)
        assert marked(mark, exactly=True) == []  # killed and reaped before close returned
    finally:
        detached._ALLOWED[0] = was
        hub.close()
        kill_marked(mark)


def test_a_detached_servers_end_past_the_hubs_close_is_said(tmp_path: Path) -> None:
    """The hub's close bounds a detached server's end (``held.end_detached``'s waits took up
    to 14.5 s, past the close's 10 s, and the close returned saying only that its loop
    thread had not ended): a stubborn server still running at the close's end is sent its
    stop, not waited for, and said by name; its daemon ends after (its reaper's grace, then
    its kill of all, and the lifeline closed)."""
    mark, ready = new_mark(), tmp_path / "ready"
    server = tmp_path / "stubborn.py"
    server.write_text(STUBBORN_SERVER, encoding="utf-8")
    args = [str(server), mark, str(ready), str(SERVER_APP.parent)]
    servers = parse_servers({"srv": {"command": sys.executable, "args": args}})
    was = detached._ALLOWED[0]
    detached._ALLOWED[0] = True
    hub = McpHub(servers, cwd=tmp_path, start_timeout=START_WAIT_S)
    try:
        run = hub.tools_for(AgentSpec(name="worker", description="d"))
        assert hub.call(run, "mcp__srv__add", {"a": 2, "b": 3}).text == "5"
        assert marked(mark, exactly=True)  # the daemon runs
        with structlog.testing.capture_logs() as logs:
            hub.close(1.5)  # its servers' ends by 0.5 s (``CLOSE_MARGIN_S``): the server ends later
            # (the hub's own warning, "not ended within the close", says only that its task ran on)

            def said() -> bool:
                return any(
                    e["event"] == "mcp server stopped at the close's end, not waited for"
                    and e["server"] == "srv"
                    for e in list(logs)
                )

            polling.wait_until(said, "the close said the server had not ended", WAIT)
        polling.wait_until(lambda: not marked(mark, exactly=True), "the daemon ended", WAIT)
    finally:
        detached._ALLOWED[0] = was
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
    argv = [sys.executable, "-c", HOST, str(server), mark, str(ready)]
    host_leaves_nothing(argv, mark, WAIT, lost=False)


NODE_HOST = """
import sys
from subagents.definitions.spec import AgentSpec
from subagents.mcp import McpHub, parse_servers
from subagents.tools.detached import allow
allow()  # as a cluster's node host does (Ray kills its children)
config = {"command": sys.executable, "args": sys.argv[1:]}
hub = McpHub(parse_servers({"deaf": config}), start_timeout=600.0)
hub.tools_for(AgentSpec(name="worker", description="d"))  # waits for a server that never answers
"""


@pytest.mark.timeout(400)  # (a hang guard: its waits' guards, each WAIT, say what failed)
def test_a_servers_daemon_ends_when_a_node_host_is_lost(tmp_path: Path) -> None:
    """Ray, ending a lost driver's node host, SIGKILLs the host's children, then the host.
    The server's launcher was one of them: the server went with it (``PR_SET_PDEATHSIG``),
    and its hidden daemon lived on under init. Now it is detached there (not the host's
    child, as Bash's): the host's death, its lifeline, ends the server and its daemon."""
    mark, ready = new_mark(), tmp_path / "ready"
    server = tmp_path / "deaf.py"
    server.write_text(DEAF_SERVER, encoding="utf-8")
    argv = [sys.executable, "-c", NODE_HOST, str(server), mark, str(ready)]
    host_leaves_nothing(argv, mark, WAIT, lost=True)


ATTACK = (
    "import os, sys\n"
    "try:\n"
    "    os.open(sys.argv[1], os.O_RDONLY | os.O_NONBLOCK)\n"
    "    print('opened')\n"
    "except OSError as exc:\n"
    "    print('refused', exc.strerror)\n"
)
"""A reader of the status pipe by its path: one held open keeps the reaper's lifeline from
firing when the runtime dies (its server and daemons would outlive it)."""


def _stopped_child() -> int:
    """The one stopped child of this process (its pid, > 0), or 0."""
    for pid in children_of(os.getpid()):
        with contextlib.suppress(OSError):
            stat = Path(f"/proc/{pid}/stat").read_bytes()
            if pid > 0 and stat[stat.rindex(b")") + 2 :].startswith(b"T"):
                return pid
    return 0


@landlock
def test_a_sandboxed_command_cannot_open_a_servers_status_pipe_by_its_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server's launcher is held (stopped) before it opens its status pipe by the path
    it was given: in that moment a sandboxed command (of another run, the same user) tries
    to open that path for reading. The FIFO of session 25 had a name then, which it opened
    (its name was removed only once the launcher had opened it); the runtime's ``/proc``
    link it may not open (Landlock refuses it ``ptrace`` access to the runtime)."""
    once = tmp_path / "stopped-once"
    launcher = tmp_path / "python"
    stop_once = f"if mkdir {once} 2>/dev/null; then kill -STOP $$; fi"
    launcher.write_text(f'#!/bin/sh\n{stop_once}\nexec {sys.executable} "$@"\n')
    launcher.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(launcher))
    servers = parse_servers({"srv": {"command": str(launcher), "args": [str(SERVER_APP)]}})
    hub = McpHub(servers, cwd=tmp_path, start_timeout=START_WAIT_S)
    spec = AgentSpec(name="worker", description="d")
    started: dict[str, object] = {}
    starter = threading.Thread(
        target=lambda: started.setdefault("run", hub.tools_for(spec)), daemon=True
    )
    groups = ProcessGroups(scratch_root=tmp_path)
    stopped = 0
    try:
        starter.start()
        polling.wait_until(lambda: _stopped_child() > 0, "the server's launcher stopped", WAIT)
        stopped = _stopped_child()
        assert stopped > 0, "the launcher was continued by something else"  # (before a kill)
        argv = Path(f"/proc/{stopped}/cmdline").read_bytes().split(b"\0")
        path = argv[argv.index(b"--status-path") + 1].decode()
        sandbox = Sandbox.coerce(Sandbox()).for_run(
            workspace=tmp_path, read_only=False, network=True
        )
        attacker = groups.start(
            f"{shlex.quote(sys.executable)} -c {shlex.quote(ATTACK)} {shlex.quote(path)}",
            cwd=tmp_path, run_id="another", sandbox=sandbox,
        )  # fmt: skip
        attacker.wait(WAIT)
        attacker.drained.wait(WAIT)
        said = attacker.output.read_text()
        assert "refused" in said and "opened" not in said, (path, said)
        os.kill(stopped, signal.SIGCONT)
        starter.join(WAIT)
        assert not starter.is_alive() and "run" in started  # the server started all the same
    finally:
        if stopped > 0:
            with contextlib.suppress(ProcessLookupError):
                os.kill(stopped, signal.SIGCONT)
        groups.kill_all()
        hub.close()
