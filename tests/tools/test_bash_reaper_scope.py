"""A command cannot signal its own reaper: its shell starts in a Landlock domain of its own
that scopes signals (ABI 6), nested under the reaper's, so ``kill -KILL $PPID`` (or
``-STOP``) is refused while the reaper still kills everything the command starts. Before,
a SIGKILLed reaper left only the environment mark, which ``env -i`` escapes: the daemon
lived on. The command still signals its own processes (``kill $!``, ``kill 0``). Only in
the sandbox: an unsandboxed command may signal what it likes, as before."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

import pytest

from ns_pids import NS
from subagents.tools.processes import ProcessGroups
from subagents.tools.sandbox_exec import kernel_abi

from .conftest import make_context, wait_until
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
