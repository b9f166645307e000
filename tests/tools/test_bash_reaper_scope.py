"""A command cannot signal its own reaper: its shell starts in a Landlock domain of its own
that scopes signals (ABI 6), nested under the reaper's, so ``kill -KILL $PPID`` (or
``-STOP``) is refused while the reaper still kills everything the command starts. Before,
a SIGKILLed reaper left only the environment mark, which ``env -i`` escapes: the daemon
lived on. The command still signals its own processes (``kill $!``, ``kill 0``). Only in
the sandbox: an unsandboxed command may signal what it likes, as before."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ns_pids import NS
from subagents.tools.processes import ProcessGroups
from subagents.tools.sandbox_exec import kernel_abi

from .conftest import WAIT, make_context, wait_until
from .test_bash import bash
from .test_bash_escapes import alive, pid_in
from .test_bash_reaper import hidden, until_pid
from .test_sandbox import sandboxed

scoped = pytest.mark.skipif(kernel_abi() < 6, reason="the kernel offers no Landlock ABI 6")
ESCAPES = "kill -STOP $PPID; kill -KILL $PPID"
"""The command's tries on its reaper (its shell's parent)."""


def leaves_then_escapes(pidfile: Path) -> str:
    """A daemon (``env -i``, a session of its own) started, then the tries on the reaper."""
    return f"{hidden(pidfile)} {until_pid(pidfile)}; {ESCAPES}"


def gone(pid: int, what: str) -> None:
    """Wait for ``pid``'s end; a test that fails leaves nothing behind either."""
    try:
        wait_until(lambda: not alive(pid), what=what)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def test_an_unsandboxed_command_still_signals_another_calls_process(
    repo: Path, processes: ProcessGroups
) -> None:
    """Outside the sandbox no scope and no PID namespace: a command may stop a server an
    earlier Bash call of the run started (what the owner allowed by turning the sandbox
    off)."""
    ctx = make_context(repo, processes)
    pidfile = repo / "server"
    started = bash(
        ctx,
        command=f"sleep 300 & echo $! {NS} > {pidfile}",
        run_in_background=True,
    )
    assert not started.is_error, started.content
    server = pid_in(pidfile)
    try:
        out = bash(ctx, command=f"kill {server} && echo sent").content
        assert "sent" in out, out
        gone(server, "the earlier call's server, killed by a later call")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(server, signal.SIGKILL)


RUNTIME_UNDER_NO_NEW_PRIVS = """
import sys
from pathlib import Path
from subagents.tools.processes import ProcessGroups
groups = ProcessGroups(scratch_root=Path(sys.argv[1]))
try:
    p = groups.start(sys.argv[2], cwd=Path(sys.argv[1]), run_id="r")
    print("exit", p.wait(float(sys.argv[3])))
    p.drained.wait(float(sys.argv[3]))
    print(p.output.read_text())
finally:
    groups.kill_all()
"""
"""A runtime that starts one unsandboxed command (``argv[2]``) and prints how it ended."""


@scoped
@pytest.mark.skipif(shutil.which("setpriv") is None, reason="no setpriv (util-linux)")
def test_an_unsandboxed_command_signals_freely_when_the_runtime_has_no_new_privs(
    tmp_path: Path,
) -> None:
    """Under Docker, Kubernetes (``allowPrivilegeEscalation: false``) or systemd's
    ``NoNewPrivileges=yes`` the runtime itself runs with ``no_new_privs``, and so does every
    command it starts: that is no sign of the sandbox. An unsandboxed command there may still
    signal a process outside its call (a server an earlier call started): no signal scope
    (before, the reaper inferred the sandbox from ``no_new_privs``: ``Operation not
    permitted``)."""
    outsider = subprocess.Popen(["sleep", "300"])
    assert outsider.pid > 0
    try:
        done = subprocess.run(
            ["setpriv", "--no-new-privs", sys.executable, "-c", RUNTIME_UNDER_NO_NEW_PRIVS,
             str(tmp_path), f"kill -0 {outsider.pid} && echo sent", str(WAIT)],
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
            capture_output=True, text=True, timeout=WAIT, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "exit 0" in done.stdout and "sent" in done.stdout, done.stdout
    finally:
        outsider.kill()
        outsider.wait()


@scoped
def test_a_sandboxed_command_cannot_kill_its_reaper(repo: Path, processes: ProcessGroups) -> None:
    """In the sandbox the reaper runs in the sandbox's own domain: the command's is nested."""
    ctx = sandboxed(repo, processes, read_only=False)
    pidfile = repo / "pid"
    result = bash(ctx, command=leaves_then_escapes(pidfile))
    gone(pid_in(pidfile), "the sandboxed env -i daemon killed by its reaper")
    assert "Operation not permitted" in result.content, result.content


@pytest.mark.parametrize("sandbox", ["plain", "sandboxed"])
def test_a_command_still_signals_its_own_processes(
    repo: Path, processes: ProcessGroups, sandbox: str
) -> None:
    if sandbox == "sandboxed" and kernel_abi() < 4:
        pytest.skip("the kernel offers no Landlock ABI 4+")
    ctx = (
        sandboxed(repo, processes, read_only=False)
        if sandbox == "sandboxed"
        else make_context(repo, processes)
    )
    out = bash(ctx, command="sleep 100 & kill $!; wait $!; echo killed $?").content
    assert "killed 143" in out, out
    for kill in ("kill -- -$$", "kill 0"):  # the shell's group: itself and its sleep
        pidfile = repo / f"pid{len(kill)}"
        out = bash(
            ctx,
            command=f"sleep 300 & echo $! {NS} > {pidfile}; {kill}; echo lived",
        ).content
        assert "lived" not in out, (kill, out)
        gone(pid_in(pidfile), f"{kill}'s sleep killed")
