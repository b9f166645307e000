"""A command's reaper is not the runtime's child (``tools.detached``): Ray, ending a lost
driver's node host, SIGKILLs the host's direct children, and when those were the reapers
each took only its shell with it (``PR_SET_PDEATHSIG``): a daemon the command had started
(``setsid``, ``env -i``) went on under init. Now such a kill reaches no reaper, and the
runtime's end (its lifeline) stops each one, which kills everything its command started."""

from __future__ import annotations

import contextlib
import gc
import os
import resource
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from marked import children_of, lose_node
from subagents.tools import detached
from subagents.tools import processes as processes_module
from subagents.tools.detached import held
from subagents.tools.processes import LauncherStuck, ProcessGroups

from .conftest import WAIT, wait_until
from .test_bash_escapes import alive, pid_in
from .test_bash_reaper import hidden, until_pid
from .test_sandbox import landlock

RUNTIME = """
import sys
from pathlib import Path
from subagents.tools.detached import allow, held
from subagents.tools.processes import ProcessGroups
from subagents.tools.sandbox import Sandbox
NS = "$(readlink /proc/$$/ns/pid)"  # (ns_pids.NS: its PID namespace)

allow()  # as a cluster's node host does (Ray kills its children)
where = Path(sys.argv[1])
sandbox = None
if sys.argv[2] == "sandboxed":
    sandbox = Sandbox.coerce(Sandbox()).for_run(workspace=where, read_only=False, network=True)
groups = ProcessGroups(scratch_root=where)
waits = sys.argv[3] + f"; echo $$ {NS} > {where}/shell; sleep 600"
started = [
    groups.start(waits, cwd=where, run_id="r", sandbox=sandbox),
    groups.start(sys.argv[4], cwd=where, run_id="r", sandbox=sandbox, background=True),
]
print("started", flush=True)
sys.stdin.read()  # until killed
"""


def host_lost(where: Path, mode: str) -> None:
    """A runtime with a waiting command and a background one, each with a hidden daemon;
    its direct children SIGKILLed (as Ray does), then itself: nothing of them is left."""
    first, second = where / "daemon1", where / "daemon2"
    runtime = subprocess.Popen(
        [
            sys.executable, "-c", RUNTIME, str(where), mode,
            f"{hidden(first)} {until_pid(first)}", f"{hidden(second)} {until_pid(second)}",
        ],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    )  # fmt: skip
    pids: list[int] = []
    try:
        assert runtime.stdout is not None
        assert runtime.stdout.readline() == b"started\n"
        pids += [pid_in(first), pid_in(second), pid_in(where / "shell")]
        lose_node(runtime, WAIT)  # as Ray ends a lost driver's node host
        wait_until(
            lambda: not any(alive(pid) for pid in pids),
            what=f"the lost host's commands and daemons gone: {[p for p in pids if alive(p)]}",
        )
    finally:
        runtime.kill()
        runtime.wait(WAIT)
        for pid in pids:  # a failed run leaves nothing behind either
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture(autouse=True)
def detaching() -> Iterator[None]:
    """Reapers detached in this process, as in a cluster's node host; as before after."""
    was = detached._ALLOWED[0]
    detached.allow()
    yield
    detached._ALLOWED[0] = was


def test_a_reaper_stays_the_runtimes_child_unless_allowed(
    tmp_path: Path, processes: ProcessGroups
) -> None:
    """Outside a node host the runtime reaps its reapers itself: where PID 1 never reaps,
    a detached one would stay a zombie for good."""
    detached._ALLOWED[0] = False
    process = processes.start("exit 3", cwd=tmp_path, run_id="r1")
    assert process.detached is None
    assert process.reaper_pid == process.popen.pid
    assert process.wait(WAIT) == 3


def test_a_kill_of_the_runtimes_children_leaves_no_daemon(tmp_path: Path) -> None:
    host_lost(tmp_path, "plain")


@landlock
def test_a_kill_of_the_runtimes_children_leaves_no_sandboxed_daemon(tmp_path: Path) -> None:
    host_lost(tmp_path, "sandboxed")


def test_a_detached_reaper_is_held_and_killed_by_its_pidfd(
    tmp_path: Path, processes: ProcessGroups
) -> None:
    """The runtime's children SIGKILLed, the runtime living on: the reaper still runs (not
    its child), is told apart from its launcher, and a kill still ends all it holds."""
    pidfile = tmp_path / "pid"
    process = processes.start(f"{hidden(pidfile)} sleep 600", cwd=tmp_path, run_id="r1")
    daemon = pid_in(pidfile)
    assert process.detached is not None
    assert process.reaper_pid != process.popen.pid
    assert process.reaper_pid not in children_of(os.getpid())
    assert process.poll() is None and alive(process.reaper_pid)
    processes.kill(process, "stop")
    assert process.contained(), process.said
    assert process.poll() == -signal.SIGTERM
    wait_until(lambda: not alive(daemon), what="the daemon killed by its detached reaper")


@pytest.mark.parametrize("code", [0, 3])
def test_a_detached_reapers_exit_code_is_its_shells(
    tmp_path: Path, processes: ProcessGroups, code: int
) -> None:
    process = processes.start(f"exit {code}", cwd=tmp_path, run_id="r1")
    assert process.wait(WAIT) == code
    assert process.exit_code() == code and process.contained()


def test_a_detached_reapers_pidfd_goes_with_its_process(
    tmp_path: Path, processes: ProcessGroups
) -> None:
    """One pidfd a command, closed when the runtime drops the command: none accumulate."""

    def run_some() -> None:
        for _ in range(5):
            process = processes.start("true", cwd=tmp_path, run_id="r1")
            process.wait(WAIT)
            processes.kill_run("r1")

    run_some()  # the relay threads, the scratch directory: made once
    gc.collect()
    before = len(os.listdir("/proc/self/fd"))
    run_some()
    gc.collect()
    assert len(os.listdir("/proc/self/fd")) <= before


def test_a_reaper_whose_pidfd_cannot_be_opened_is_not_taken_for_ended() -> None:
    """``pidfd_open`` failing for want of a file descriptor (EMFILE) is raised (``start``
    then closes the status pipe: the reaper's lifeline stops it), not read as the reaper's
    end: the runtime would say a running command ended (seen: ``ended()`` True)."""
    status, told = os.pipe()
    os.write(told, f"pid {os.getpid()}\n".encode())
    limits = resource.getrlimit(resource.RLIMIT_NOFILE)
    spare: list[int] = []
    try:
        highest = max(int(fd) for fd in os.listdir("/proc/self/fd"))
        resource.setrlimit(resource.RLIMIT_NOFILE, (highest + 8, limits[1]))
        with contextlib.suppress(OSError):
            while True:
                spare.append(os.dup(status))
        with pytest.raises(OSError, match="Too many open files"):
            held(status)
    finally:
        for fd in spare:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, limits)
        os.close(status)
        os.close(told)


def _stopped_children() -> list[int]:
    """This process's children that are stopped (``T`` in ``/proc/PID/stat``)."""
    stopped = []
    for pid in children_of(os.getpid()):
        with contextlib.suppress(OSError):
            stat = Path(f"/proc/{pid}/stat").read_bytes()
            if stat[stat.rindex(b")") + 2 :].startswith(b"T"):
                stopped.append(pid)
    return stopped


def test_a_stopped_launcher_is_killed_and_its_start_refused_naming_the_command(
    tmp_path: Path, processes: ProcessGroups, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The start waits for the launcher's first process to detach its reaper and end; one
    stopped before (``kill -STOP`` by another process of the user, a frozen cgroup: here it
    stops itself) made the start, and the agent's turn, wait for ever. Now it is killed
    after ``DETACH_WAIT_S`` (its shell never starts) and the start refused with an error
    that names the command; nothing of it is left stopped."""
    launcher = tmp_path / "python"
    launcher.write_text(f'#!/bin/sh\nkill -STOP $$\nexec {sys.executable} "$@"\n')
    launcher.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(launcher))
    monkeypatch.setattr(processes_module, "DETACH_WAIT_S", 1.0)
    before = set(_stopped_children())
    outcome: dict[str, str] = {}

    def start() -> None:
        try:
            processes.start("echo never ran", cwd=tmp_path, run_id="r1")
            outcome["error"] = "started"
        except LauncherStuck as exc:
            outcome["error"] = str(exc)

    starter = threading.Thread(target=start, daemon=True)
    starter.start()
    starter.join(WAIT)
    try:
        assert not starter.is_alive(), "the start still waits for a stopped launcher"
        assert "'echo never ran'" in outcome["error"], outcome
        assert "did not start it" in outcome["error"], outcome
        assert set(_stopped_children()) <= before  # the launcher killed, and reaped
        assert processes.live_count() == 0
    finally:
        for pid in set(_stopped_children()) - before:  # a failed run leaves nothing either
            if pid > 0:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


def test_a_reaper_that_never_says_its_pid_is_not_waited_for_for_ever() -> None:
    """After the launcher's first process ended, its reaper says its pid at once; one
    stopped first (or stuck) said nothing, and the read waited for ever: now bounded."""
    status, told = os.pipe()
    try:
        with pytest.raises(TimeoutError, match=r"did not say its pid within 0\.2 s"):
            held(status, 0.2)
        os.write(told, f"pid {os.getpid()}\nexit 0\n".encode())  # once said: as before
        found = held(status, 0.2)
        assert found is not None and found[0].pid == os.getpid() and found[1] == b"exit 0\n"
    finally:
        os.close(status)
        os.close(told)
