"""A stray's pid taken by another process between the look through /proc and the kill: the
other process lives. Shown for real in a pid namespace of its own (``unshare``, as root),
where the test alone starts processes, so ``ns_last_pid`` hands the stray's number to the
next one for sure; the moment is the next ``/proc/*/environ`` opened after the stray's own
(Python's ``open`` audit event), when the stray has been read and not yet killed.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from pid_reuse import KILLED, namespaces

SCRIPT = (
    KILLED
    + r"""
import os, subprocess, sys
from subagents.tools import strays

cookie = "reuse-test"
stray = subprocess.Popen(["sleep", "300"], env={strays.TREE_COOKIE: cookie})
filler = subprocess.Popen(["sleep", "300"])  # a pid after the stray's: one more look
assert filler.pid > stray.pid
target = f"/proc/{stray.pid}/environ"
state = {"seen": False, "victim": None}

def hook(event, args):
    if event != "open" or state["victim"] is not None or not isinstance(args[0], str):
        return
    if args[0] == target:
        state["seen"] = True
    elif state["seen"] and args[0].endswith("/environ"):
        state["victim"] = 0  # (no second swap from the opens below)
        stray.kill()
        stray.wait()
        with open("/proc/sys/kernel/ns_last_pid", "w") as f:
            f.write(str(stray.pid - 1))
        victim = subprocess.Popen(["sleep", "300"])
        assert victim.pid == stray.pid, (victim.pid, stray.pid)
        state["victim"] = victim

sys.addaudithook(hook)
strays.kill_strays(cookie)
victim = state["victim"]
assert victim is not None and victim != 0, "the pid was never reused"
print("victim", "killed" if killed(victim.pid) else "alive")
for p in (victim, filler):
    p.kill()
    p.wait()
"""
)


@pytest.mark.skipif(not namespaces(), reason="needs root and unshare (a pid namespace)")
def test_a_pid_reused_between_the_look_and_the_kill_is_not_killed() -> None:
    done = subprocess.run(
        ["unshare", "-fp", "--mount-proc", sys.executable, "-c", SCRIPT],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["victim", "alive"], done.stdout
