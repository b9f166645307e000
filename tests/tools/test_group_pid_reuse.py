"""A command's group is never signalled by its number once its launcher was reaped: that number
may be another process's by then, and the leader of a group of its own (an MCP server's
launcher, a Bash command's: each starts a session of its own). Each test on both paths
(``group_leader``): through the leader's pidfd (``PIDFD_SIGNAL_PROCESS_GROUP``, Linux 6.9+),
and by the number, checked (the fallback, forced: a ``GroupLeader`` without a pidfd).

Why: a command whose reaper was killed before saying all was gone (``Process.contained``
false) was killed again by its group (``ProcessGroups._reap_left``) whenever its run ended
or the runtime closed, by ``killpg(launcher's pid)``, long after that launcher had been
reaped. In a loaded full test run pids wrap within minutes, and the audit of one such run
(session 30) saw this stale group kill at a fixture's teardown; the SIGKILL of whatever
group then held that number is what a stdio MCP server that "exited before answering
initialize" with no stderr looks like (its launcher's group, the sandbox's waiter and PID
namespace init with it, killed at once). Shown for real in a PID namespace of its own
(``unshare``, as root), where the test alone starts processes, so ``ns_last_pid`` hands the
reaped launcher's number to the next process for sure.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from pid_reuse import KILLED, namespaces
from subagents.tools.group_leader import GroupLeader, kernel_signals_groups
from subagents.tools.process import Process
from subagents.tools.processes import ProcessGroups

SCRIPT = (
    KILLED
    + r"""
import os, signal, subprocess, sys, tempfile
from pathlib import Path
from subagents.tools.group_leader import GroupLeader
from subagents.tools.hooks import _end
from subagents.tools.processes import ProcessGroups

by_pidfd = sys.argv[1] == "pidfd"  # else by its number, checked (as before Linux 6.9)
root = Path(tempfile.mkdtemp())

def reap_all():  # what came to this init (a killed launcher's shell: it pins its session's id)
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            break

def take(number):  # the next process started has ``number``, and leads a group of its own
    with open("/proc/sys/kernel/ns_last_pid", "w") as f:
        f.write(str(number - 1))
    victim = subprocess.Popen(["sleep", "300"], start_new_session=True)
    assert victim.pid == number, (victim.pid, number)
    return victim

def said(what, victim):
    print(what, "killed" if killed(victim.pid) else "alive")
    victim.kill()
    victim.wait()

groups = ProcessGroups(scratch_root=root)
process = groups.start("sleep 300", cwd=root, run_id="run")
if not by_pidfd:
    process.leader = GroupLeader(process.popen)  # no pidfd: by its number, checked
assert process.leader.by_pidfd == by_pidfd
launcher = process.popen.pid
assert launcher > 1, launcher
os.kill(launcher, signal.SIGKILL)  # its reaper killed before it said all was gone
process.popen.wait()  # reaped: its number is free, the run still lists it
reap_all()
victim = take(launcher)
groups.kill_all()  # the run's end: what the killed reaper left is killed
said("command", victim)

hook = subprocess.Popen(["true"], stdout=subprocess.PIPE, start_new_session=True)
leader = GroupLeader.of(hook) if by_pidfd else GroupLeader(hook)
assert leader.by_pidfd == by_pidfd
hook.wait()  # ended and reaped before its end's kill of what it left in its group
victim = take(hook.pid)
_end(leader, held=False)
said("hook", victim)
"""
)


PATHS = [
    pytest.param(
        "pidfd",
        marks=pytest.mark.skipif(
            not kernel_signals_groups(), reason="needs PIDFD_SIGNAL_PROCESS_GROUP (Linux 6.9+)"
        ),
    ),
    "number",
]
"""A group's signals through its leader's pidfd, or (before Linux 6.9, no pidfd) by its
number, checked (``group_leader``)."""


@pytest.mark.skipif(not namespaces(), reason="needs root and unshare (a pid namespace)")
@pytest.mark.parametrize("path", PATHS)
def test_a_reaped_launchers_number_taken_by_another_group_is_not_killed(path: str) -> None:
    """A Bash command's launcher killed and reaped, its number taken by a new group, then
    its run's end; a hook that ended, its number taken, then its end's kill of what it left
    in its group (``hooks._end``, where the hook is not held: off Linux)."""
    done = subprocess.run(
        ["unshare", "-fp", "--mount-proc", sys.executable, "-c", SCRIPT, path],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["command alive", "hook alive"], done.stdout + done.stderr


@pytest.mark.parametrize("path", PATHS)
def test_a_reaped_launchers_group_with_a_member_left_is_still_killed(
    tmp_path: Path, path: str
) -> None:
    """The other half of the promise: a launcher reaped while a process of its group lives
    on (the group then holds the number: no other process can take it) is killed by its
    group all the same (``_reap_left`` after its reaper was killed before saying all was
    gone): through its pidfd (the group keeps its identity), or by its number."""
    leader = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import os, subprocess; p = subprocess.Popen(['sleep', '300']);"
            " print(p.pid, flush=True); os._exit(0)",
        ],
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    group = GroupLeader.of(leader) if path == "pidfd" else GroupLeader(leader)
    assert group.by_pidfd == (path == "pidfd")
    assert leader.stdout is not None
    member = int(leader.stdout.readline())
    assert member > 1, member
    leader.wait()  # reaped: its number is its group's, held by the member
    leader.stdout.close()
    process = Process("bash_1", "sleep 300", "run", leader, tmp_path / "out", leader=group)
    try:
        assert os.getpgid(member) == leader.pid
        process.signal_reaper(signal.SIGKILL)
        assert _ends(member), "the group's member outlived its group's kill"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(member, signal.SIGKILL)


def _ends(pid: int) -> bool:
    """Whether ``pid`` (not our child: the leader's orphan) ends within 60 s (a hang guard)."""
    fd = os.pidfd_open(pid)
    try:
        return bool(select.select([fd], [], [], 60)[0])
    finally:
        os.close(fd)


def test_a_commands_group_is_held_by_its_leaders_pidfd_where_the_kernel_has_it(
    tmp_path: Path,
) -> None:
    """Every Bash command's group goes through a ``GroupLeader`` opened at its start, by the
    pidfd where the kernel signals groups so (the namespace test above needs root)."""
    groups = ProcessGroups(scratch_root=tmp_path)
    try:
        process = groups.start("exit 0", cwd=tmp_path, run_id="run")
        assert process.leader is not None
        assert process.leader.by_pidfd == kernel_signals_groups()
    finally:
        groups.kill_all()
