"""A Bash command's daemon that leaves its process group (``setsid``, a double fork) is
killed with the command all the same: when the command ends, times out, or its run ends.

Each command's processes carry a cookie in their environment (``SUBAGENTS_PROCESS_TREE``),
which a new session or a double fork keeps; what the group's kill cannot reach is found by
it in /proc. Read from /proc here too: a daemon still alive is a test failure.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import ns_pids
from ns_pids import NS
from subagents.tools.base import ToolResult
from subagents.tools.builtin import builtin_tools
from subagents.tools.context import ToolContext
from subagents.tools.processes import ProcessGroups

from .conftest import WAIT, wait_until
from .test_bash import bash
from .test_sandbox import landlock, sandboxed

TOOLS = builtin_tools()


def daemon(pidfile: Path) -> str:
    """A process in a session of its own (not in the command's group), writing its pid."""
    return f"setsid sh -c 'echo $$ {NS} > {pidfile}; exec sleep 300' > /dev/null 2>&1 &"


def double_forked(pidfile: Path) -> str:
    """A daemon made the classic way: a subshell forks it and exits; it calls ``setsid``."""
    return f"( setsid sh -c 'echo $$ {NS} > {pidfile}; exec sleep 300' > /dev/null 2>&1 & ) ; true"


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, killed but not yet reaped by its new parent, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] not in ("Z", "X")


def pid_in(pidfile: Path) -> int:
    wait_until(lambda: pidfile.exists() and pidfile.read_text().strip() != "", what="the pid")
    return ns_pids.pid_in(pidfile)


def test_a_daemon_in_a_new_session_dies_when_its_command_ends(
    context: ToolContext, repo: Path
) -> None:
    pidfile = repo / "pid"
    command = f"{daemon(pidfile)} while [ ! -s {pidfile} ]; do :; done"
    assert not bash(context, command=command).is_error
    pid = pid_in(pidfile)
    wait_until(lambda: not alive(pid), what="the daemon killed with its command")


def test_a_double_forked_daemon_dies_when_its_command_ends(
    context: ToolContext, repo: Path
) -> None:
    pidfile = repo / "pid"
    command = f"{double_forked(pidfile)}; while [ ! -s {pidfile} ]; do :; done"
    assert not bash(context, command=command).is_error
    pid = pid_in(pidfile)
    wait_until(lambda: not alive(pid), what="the daemon killed with its command")


def test_a_timeout_kills_a_daemon_in_a_new_session(context: ToolContext, repo: Path) -> None:
    pidfile = repo / "pid"
    result: list[ToolResult] = []
    command = f"{daemon(pidfile)} sleep 300"
    worker = threading.Thread(
        target=lambda: result.append(bash(context, command=command, timeout=2000))
    )
    worker.start()
    worker.join(WAIT)
    assert not worker.is_alive()
    assert "Command timed out" in result[0].content
    if pidfile.exists():  # on a machine too loaded to start it in 2 s, it never ran
        pid = pid_in(pidfile)
        wait_until(lambda: not alive(pid), what="the daemon killed with its command")


def test_the_end_of_a_run_kills_a_background_commands_daemon(
    context: ToolContext, repo: Path
) -> None:
    pidfile = repo / "pid"
    bash(context, command=f"{daemon(pidfile)} sleep 300", run_in_background=True)
    pid = pid_in(pidfile)
    context.processes.kill_run(context.run_id)
    wait_until(lambda: not alive(pid), what="the daemon killed with its run")


def test_the_cookie_names_the_command_only(context: ToolContext) -> None:
    first = bash(context, command="echo $SUBAGENTS_PROCESS_TREE").content
    second = bash(context, command="echo $SUBAGENTS_PROCESS_TREE").content
    assert first and second and first != second
    assert "SUBAGENTS_PROCESS_TREE" not in os.environ


def test_the_end_of_a_run_kills_the_daemon_of_a_background_shell_already_read(
    context: ToolContext, repo: Path
) -> None:
    """A background shell that started a daemon and ended, its end read by BashOutput (which
    lets the runtime forget it): the daemon still dies with its run."""
    pidfile = repo / "pid"
    command = f"{daemon(pidfile)} while [ ! -s {pidfile} ]; do :; done"
    started = bash(context, command=command, run_in_background=True).content
    shell_id = started.rsplit(" ", 1)[-1]
    pid = pid_in(pidfile)
    wait_until(
        lambda: "<status>completed" in str(TOOLS["BashOutput"].run({"bash_id": shell_id}, context)),
        what="the shell's end read",
    )
    assert context.processes.get(context.run_id, shell_id) is None  # forgotten
    context.processes.kill_run(context.run_id)
    wait_until(lambda: not alive(pid), what="the daemon killed with its run")


@landlock
def test_a_daemon_in_a_new_session_dies_with_its_command_in_the_sandbox(
    repo: Path, processes: ProcessGroups
) -> None:
    """The launcher (Landlock) keeps the environment it is given: the cookie reaches the
    command and its daemon all the same."""
    ctx = sandboxed(repo, processes, read_only=False)
    pidfile = repo / "pid"
    command = f"{daemon(pidfile)} while [ ! -s {pidfile} ]; do :; done"
    assert not bash(ctx, command=command).is_error
    pid = pid_in(pidfile)
    wait_until(lambda: not alive(pid), what="the sandboxed daemon killed with its command")
