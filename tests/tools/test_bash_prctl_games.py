"""A command's daemon that plays with its own process attributes is held all the same.

A daemon may make itself a subreaper (``PR_SET_CHILD_SUBREAPER``): the orphans its own
children leave then re-parent to it, not to the command's reaper, so the reaper's first
round of kills reaches the daemon but not them. Killed, the daemon's orphans re-parent to
the nearest living subreaper above it, the reaper, whose next round kills them: the reaper
kills until no child is left, not once. Read from /proc here, as the other escape tests.
"""

from __future__ import annotations

import sys
from pathlib import Path

from subagents.tools.context import ToolContext

from .conftest import wait_until
from .test_bash import bash
from .test_bash_escapes import alive, pid_in

SUBREAPER = """
import ctypes, os, sys, time
if ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) != 0:  # PR_SET_CHILD_SUBREAPER
    sys.exit("no subreaper")
if os.fork() == 0:  # a daemon of its own, double forked, its environment cleared
    os.setsid()
    if os.fork() == 0:
        with open(sys.argv[1] + ".tmp", "w") as f:
            f.write(f"{os.getpid()} {os.readlink('/proc/self/ns/pid')}")  # (ns_pids)
        os.rename(sys.argv[1] + ".tmp", sys.argv[1])
        os.execv("/usr/bin/env", ["env", "-i", "sleep", "300"])
    os._exit(0)
time.sleep(300)
"""


def test_a_daemon_that_makes_itself_a_subreaper_dies_with_its_command(
    context: ToolContext, repo: Path
) -> None:
    script, pidfile = repo / "subreaper.py", repo / "pid"
    script.write_text(SUBREAPER)
    command = (
        f"setsid env -i {sys.executable} -I -S {script} {pidfile} > /dev/null 2>&1 &"
        f" while [ ! -s {pidfile} ]; do :; done"
    )
    assert not bash(context, command=command).is_error
    pid = pid_in(pidfile)
    wait_until(lambda: not alive(pid), what="the subreaper daemon's own daemon killed")
