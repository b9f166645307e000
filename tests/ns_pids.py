"""A pid a Bash command wrote, as the tests see it.

A command runs in a PID namespace of its own where the system allows (tools/reaper_ns.py):
its ``$$`` and ``$!`` are pids in there, another process (or none) out here. So a command
writes its PID namespace beside a pid (``NS``: ``echo $$ NS > file``) and ``outer`` finds
that process out here: the one in that namespace with that pid there (``NSpid``).
"""

from __future__ import annotations

import os
from pathlib import Path

NS = "$(readlink /proc/$$/ns/pid)"
"""Shell words for the command's PID namespace (written after the pid)."""
GONE = 2**22 + 1
"""What ``outer`` says of a process no longer found: above the kernel's largest pid
(``PID_MAX_LIMIT``), so no process has it and a signal to it reaches nobody. Never a
number <= 0: a test's cleanup ``os.kill``s what it read, and ``kill(-1, SIGKILL)`` as root
kills every process of the machine (seen: this helper said -1 once)."""


def outer(said: str) -> int:
    """The pid out here of what a command wrote (``PID`` or ``PID NS``); ``GONE`` when that
    namespace holds no such process any more."""
    fields = said.split()
    inner = int(fields[0])
    if inner <= 0:
        raise ValueError(f"not a pid: {said!r}")
    if len(fields) == 1 or fields[1] == os.readlink("/proc/self/ns/pid"):
        return inner
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.readlink(entry / "ns" / "pid") != fields[1]:
                continue
            status = (entry / "status").read_text()
        except OSError:
            continue
        line = next((x for x in status.splitlines() if x.startswith("NSpid:")), "")
        if line.split()[-1:] == [str(inner)]:
            return int(entry.name)
    return GONE


def pid_in(pidfile: Path) -> int:
    """``outer`` of what ``pidfile`` holds (written already)."""
    return outer(pidfile.read_text())
