"""A Bash command's processes never outlive its call, its background shell, its run or the
runtime, however they hide: a new session, a double fork, a cleared environment (``env -i``,
which the environment mark of session 22 could not follow), SIGTERM ignored.

The reaper (``tools/reaper.py``) is every command's parent and every orphan's: read from
/proc here whether what the command started still runs.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from ns_pids import NS
from subagents.tools.base import ToolResult
from subagents.tools.builtin import builtin_tools
from subagents.tools.context import ToolContext
from subagents.tools.processes import REAPER, ProcessGroups

from .conftest import WAIT, wait_until
from .test_bash import bash
from .test_bash_escapes import alive, pid_in
from .test_sandbox import landlock, sandboxed

TOOLS = builtin_tools()


def hidden(pidfile: Path, body: str = "exec sleep 300") -> str:
    """A daemon in a session of its own with an empty environment, writing its pid."""
    return f"setsid env -i sh -c 'echo $$ {NS} > {pidfile}; {body}' > /dev/null 2>&1 &"


def double_forked(pidfile: Path) -> str:
    """The classic daemon, then ``env -i``: a subshell forks it and exits."""
    return f"( {hidden(pidfile)} ) ; true"


def deaf(pidfile: Path) -> str:
    """A hidden daemon that ignores SIGTERM (and ``sleep``s between looks)."""
    return hidden(pidfile, 'trap "" TERM; while :; do sleep 1; done')


def until_pid(pidfile: Path) -> str:
    return f"while [ ! -s {pidfile} ]; do :; done"


def test_a_daemon_without_an_environment_dies_when_its_command_ends(
    context: ToolContext, repo: Path
) -> None:
    pidfile = repo / "pid"
    assert not bash(context, command=f"{hidden(pidfile)} {until_pid(pidfile)}").is_error
    pid = pid_in(pidfile)
    wait_until(lambda: not alive(pid), what="the env -i daemon killed with its command")


def test_a_double_forked_daemon_without_an_environment_dies_when_its_command_ends(
    context: ToolContext, repo: Path
) -> None:
    pidfile = repo / "pid"
    assert not bash(context, command=f"{double_forked(pidfile)}; {until_pid(pidfile)}").is_error
    pid = pid_in(pidfile)
    wait_until(lambda: not alive(pid), what="the double-forked daemon killed")


def test_a_timeout_kills_a_daemon_that_ignores_sigterm(context: ToolContext, repo: Path) -> None:
    """The command's timeout must fall after its daemon started, or the test proves nothing:
    on a machine too loaded to start it within the first timeout, it is tried again with a
    longer one (the daemon of a try that timed out first is gone with it, or the test fails
    on it)."""
    pidfile = repo / "pid"
    command = f"{deaf(pidfile)} {until_pid(pidfile)}; sleep 300"
    for timeout_ms in (3000, 15000, 60000):
        result: list[ToolResult] = []
        worker = threading.Thread(
            target=lambda out=result, ms=timeout_ms: out.append(
                bash(context, command=command, timeout=ms)
            )
        )
        worker.start()
        worker.join(WAIT + timeout_ms / 1000)
        assert not worker.is_alive()
        assert "Command timed out" in result[0].content
        if pidfile.exists() and pidfile.read_text().strip():
            break
    else:
        pytest.fail("the deaf daemon never started, even within a 60 s timeout")
    pid = pid_in(pidfile)
    wait_until(lambda: not alive(pid), what="the deaf daemon killed with its command")


def test_killshell_kills_a_background_shells_deaf_daemon(context: ToolContext, repo: Path) -> None:
    pidfile = repo / "pid"
    command = f"{deaf(pidfile)} sleep 300"
    shell_id = bash(context, command=command, run_in_background=True).content.rsplit(" ", 1)[-1]
    pid = pid_in(pidfile)
    killed = TOOLS["KillShell"].call({"shell_id": shell_id}, context)
    assert killed.startswith("Successfully killed shell")
    wait_until(lambda: not alive(pid), what="the daemon killed with its shell")


def test_a_background_shells_daemon_outlives_its_shell_until_the_run_ends(
    context: ToolContext, repo: Path
) -> None:
    """A background shell's daemon lives on after the shell itself ended (``npm start``
    daemonizing), as long as the run: the reaper lingers, and reports the shell's end."""
    pidfile = repo / "pid"
    command = f"{hidden(pidfile)} {until_pid(pidfile)}; exit 4"
    shell_id = bash(context, command=command, run_in_background=True).content.rsplit(" ", 1)[-1]
    pid = pid_in(pidfile)
    seen: list[str] = []

    def ended() -> bool:
        seen.append(str(TOOLS["BashOutput"].run({"bash_id": shell_id}, context)))
        return "<status>completed" in seen[-1]

    wait_until(ended, what="the shell's end read")
    assert "<exit_code>4</exit_code>" in seen[-1]
    assert alive(pid)
    context.processes.kill_run(context.run_id)
    wait_until(lambda: not alive(pid), what="the daemon killed with its run")


def test_the_runtimes_close_kills_a_background_shells_hidden_daemons(
    context: ToolContext, repo: Path
) -> None:
    first, second = repo / "first", repo / "second"
    bash(context, command=f"{deaf(first)} sleep 300", run_in_background=True)
    ended = f"{double_forked(second)}; {until_pid(second)}"
    bash(context, command=ended, run_in_background=True)
    pids = [pid_in(first), pid_in(second)]
    context.processes.kill_all()
    wait_until(lambda: not any(alive(p) for p in pids), what="every daemon killed at close")


@landlock
def test_a_sandboxed_daemon_without_an_environment_dies_with_its_command(
    repo: Path, processes: ProcessGroups
) -> None:
    """The sandbox launcher holds the command the same way (the reaper in its process)."""
    ctx = sandboxed(repo, processes, read_only=False)
    pidfile = repo / "pid"
    assert not bash(ctx, command=f"{double_forked(pidfile)}; {until_pid(pidfile)}").is_error
    pid = pid_in(pidfile)
    wait_until(lambda: not alive(pid), what="the sandboxed daemon killed with its command")


@landlock
def test_a_sandboxed_command_gets_sigpipe(repo: Path, processes: ProcessGroups) -> None:
    """Python ignores SIGPIPE and SIGXFSZ, and an ignored signal stays ignored across
    ``exec``: the launcher gives the command both back (a ``yes`` past the output cap or
    into ``| head`` ends on SIGPIPE instead of writing to a closed pipe for ever)."""
    ctx = sandboxed(repo, processes, read_only=False)
    out = bash(ctx, command="grep SigIgn /proc/self/status").content
    ignored = int(out.split()[-1], 16)
    assert ignored & (1 << (13 - 1)) == 0, out  # SIGPIPE
    assert ignored & (1 << (25 - 1)) == 0, out  # SIGXFSZ


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="needs root")
def test_without_a_list_of_children_the_command_still_runs_unheld(tmp_path: Path) -> None:
    """A kernel that lists no children (``CONFIG_PROC_CHILDREN`` off; here /proc covered by
    an empty tmpfs in a mount namespace of its own) runs the command all the same, without
    saying ``reaped`` (the runtime then falls back to the mark), instead of refusing every
    command (seen: ``No such file or directory``, exit 125)."""
    status, told = os.pipe()
    start = [sys.executable, "-I", "-S", "-c", REAPER, "--status-fd", str(told), "--"]
    script = (
        f"mount -t tmpfs none /proc && exec {shlex.join([*start, '/bin/sh', '-c', 'echo ran'])}"
    )
    try:
        done = subprocess.run(
            ["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
            capture_output=True, text=True, timeout=WAIT, check=False, pass_fds=(told,),
        )  # fmt: skip
    finally:
        os.close(told)
    with os.fdopen(status, "rb") as said:
        assert said.read() == b"exit 0\n", done
    assert (done.returncode, done.stdout) == (0, "ran\n"), done


def test_a_command_that_stops_its_reaper_is_still_held_by_it(
    repo: Path, processes: ProcessGroups, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the command may signal its own reaper (no Landlock ABI 6: made so here), it may
    SIGSTOP it. A kill's SIGTERM would then wait, pending, until the fallback SIGKILLed the
    reaper and looked for the mark (which ``env -i`` escapes): the kill continues the reaper
    too, so it still ends all it holds and says so (``contained``)."""
    monkeypatch.setenv("SUBAGENTS_LANDLOCK_ABI", "5")
    pidfile = repo / "pid"
    command = f"{hidden(pidfile)} {until_pid(pidfile)}; kill -STOP $PPID; sleep 300"
    process = processes.start(command, cwd=repo, run_id="r1")
    wait_until(lambda: pidfile.is_file() and pidfile.read_text().strip() != "", what="pid")
    pid = pid_in(pidfile)
    reaper = process.reaper_pid
    wait_until(lambda: _state(reaper) == "T", what="the reaper stopped by its command")
    processes.kill(process, "stop")
    assert process.contained(), process.said
    wait_until(lambda: not alive(pid), what="the daemon killed by its reaper")


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return "gone"


def test_a_command_dies_with_its_reaper(repo: Path, processes: ProcessGroups) -> None:
    """Ray, ending a dead driver's node host, SIGKILLs the host's direct children: the
    reapers. A reaper's shell is killed with it (``PR_SET_PDEATHSIG``) instead of going on
    under init (seen in CI: a killed driver's command alive 180 s after)."""
    pidfile = repo / "pid"
    process = processes.start(f"echo $$ {NS} > {pidfile}; sleep 300", cwd=repo, run_id="r1")
    wait_until(lambda: pidfile.is_file() and pidfile.read_text().strip() != "", what="pid")
    shell = pid_in(pidfile)
    os.kill(process.reaper_pid, signal.SIGKILL)
    wait_until(lambda: not alive(shell), what="the shell killed with its reaper")
