"""tests/pinned.py: a cleanup's kill through a pidfd reaches the process it pinned, its group
too, and never the process that took its number after it ended (shown for real in a PID
namespace of its own, ``unshare`` as root, where ``ns_last_pid`` hands the number on)."""

from __future__ import annotations

import select
import subprocess
import sys
from pathlib import Path

import pytest

from pid_reuse import KILLED, namespaces
from pinned import kill_pinned, pin

SCRIPT = (
    KILLED
    + r"""
import os, subprocess, sys
sys.path.insert(0, sys.argv[1])
from pinned import kill_pinned, pin

first = subprocess.Popen(["sleep", "300"], start_new_session=True)
pinned = pin(first.pid)
first.kill()
first.wait()  # ended and reaped: its number is free
with open("/proc/sys/kernel/ns_last_pid", "w") as f:
    f.write(str(first.pid - 1))
taker = subprocess.Popen(["sleep", "300"], start_new_session=True)  # a group of its own
assert taker.pid == first.pid, (taker.pid, first.pid)
kill_pinned(pinned, group=True)  # the first's cleanup, long after it ended
print("taker", "killed" if killed(taker.pid) else "alive")
taker.kill()
taker.wait()
"""
)


@pytest.mark.skipif(not namespaces(), reason="needs root and unshare (a pid namespace)")
def test_a_pinned_process_number_taken_by_another_is_not_killed() -> None:
    done = subprocess.run(
        [
            "unshare",
            "-fp",
            "--mount-proc",
            sys.executable,
            "-c",
            SCRIPT,
            str(Path(__file__).parent),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "taker alive", done.stdout + done.stderr


def test_a_pinned_group_leader_is_killed_with_its_group() -> None:
    leader = subprocess.Popen(
        ["sh", "-c", "sleep 300 & echo $!; wait"],
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    assert leader.stdout is not None
    member = int(leader.stdout.readline())
    assert member > 1, member
    held = pin(member)  # (pinned as soon as known: a failed run kills it, not its number)
    try:
        kill_pinned(pin(leader.pid), group=True)
        assert leader.wait(60) == -9
        assert _ends(held), "the leader's group member outlived the group's kill"
    finally:
        leader.stdout.close()
        kill_pinned(held)


def test_a_pinned_process_leading_no_group_is_killed_alone_all_the_same() -> None:
    # (the group's kill finds no group it leads, ESRCH: the process alone is still killed)
    alone = subprocess.Popen(["sleep", "300"])  # in this process's group, leading none
    try:
        kill_pinned(pin(alone.pid), group=True)
        assert alone.wait(60) == -9
    finally:
        alone.kill()
        alone.wait()


def _ends(pidfd: int) -> bool:
    """Whether the process of ``pidfd`` (not our child) ends within 60 s."""
    return pidfd >= 0 and bool(select.select([pidfd], [], [], 60)[0])
