"""A command's processes die with the runtime that started them, even when the runtime is
SIGKILLed (nothing of it runs to kill them): the reaper notices its runtime's end itself
(the status pipe's read end, which only the runtime holds, closed by the kernel) and kills
everything it holds. A foreground command that waits, a background shell whose daemon
(a session of its own) outlives the shell, and the same in the sandbox."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

from ns_pids import NS
from subagents.tools.processes import REAPER

from .conftest import WAIT, wait_until
from .test_bash_escapes import alive, pid_in
from .test_sandbox import landlock

REAPER_ARGV = [sys.executable, "-I", "-S", "-c", REAPER]

RUNTIME = """
import sys
from pathlib import Path
from subagents.tools.processes import ProcessGroups
from subagents.tools.sandbox import Sandbox
NS = "$(readlink /proc/$$/ns/pid)"  # (ns_pids.NS: its PID namespace)

where = Path(sys.argv[1])
sandbox = None
if sys.argv[2] == "sandboxed":
    sandbox = Sandbox.coerce(Sandbox()).for_run(workspace=where, read_only=False, network=True)
groups = ProcessGroups(scratch_root=where)
waits = f"sleep 600 & echo $! {NS} > {where}/child; echo $$ {NS} > {where}/shell; wait"
daemon = f"setsid sh -c 'echo $$ {NS} > {where}/daemon; exec sleep 600' > /dev/null 2>&1 &"
started = [
    groups.start(waits, cwd=where, run_id="r", sandbox=sandbox),
    groups.start(daemon, cwd=where, run_id="r", sandbox=sandbox, background=True),
]
print(*(process.reaper_pid for process in started), flush=True)
sys.stdin.read()  # until killed
"""


def killed_runtime_leaves_nothing(where: Path, mode: str) -> None:
    runtime = subprocess.Popen(
        [sys.executable, "-c", RUNTIME, str(where), mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    pids: list[int] = []
    try:
        assert runtime.stdout is not None
        pids += [int(pid) for pid in runtime.stdout.readline().split()]  # the two reapers
        assert len(pids) == 2, pids
        pids += [pid_in(where / name) for name in ("shell", "child", "daemon")]
        assert all(alive(pid) for pid in pids)
        runtime.send_signal(signal.SIGKILL)
        runtime.wait(WAIT)
        wait_until(
            lambda: not any(alive(pid) for pid in pids),
            what=f"the SIGKILLed runtime's commands gone: {[p for p in pids if alive(p)]}",
        )
    finally:
        runtime.kill()
        runtime.wait(WAIT)
        for pid in pids:  # a failed run leaves nothing behind either
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_a_sigkilled_runtimes_commands_and_daemons_die(tmp_path: Path) -> None:
    killed_runtime_leaves_nothing(tmp_path, "plain")


@landlock
def test_a_sigkilled_runtimes_sandboxed_commands_and_daemons_die(tmp_path: Path) -> None:
    killed_runtime_leaves_nothing(tmp_path, "sandboxed")


def test_a_runtime_dead_before_its_reaper_looks_is_seen(tmp_path: Path) -> None:
    """The runtime may die between starting the reaper and the reaper's asking to be told
    (no signal then comes): the reaper looks once after asking, and stops at once."""
    status, told = os.pipe()
    os.close(status)  # the runtime's end, gone before the reaper starts
    pidfile = tmp_path / "pid"
    command = ["/bin/sh", "-c", f"echo $$ {NS} > {pidfile}; sleep 600"]
    reaper = subprocess.Popen(
        [*REAPER_ARGV, "--status-fd", str(told), "--", *command],
        pass_fds=(told,),
        start_new_session=True,
    )
    os.close(told)
    try:
        assert reaper.wait(WAIT) == -signal.SIGTERM  # the shell stopped as at a SIGTERM
        if pidfile.exists() and pidfile.read_text().strip():  # it ran before the stop
            pid = pid_in(pidfile)
            wait_until(lambda: not alive(pid), what="the shell killed")
    finally:
        reaper.kill()
        reaper.wait(WAIT)
