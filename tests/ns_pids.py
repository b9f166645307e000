"""A pid a Bash command wrote, as the tests see it.

A command runs in a PID namespace of its own where the system allows (tools/reaper_ns.py):
its ``$$`` and ``$!`` are pids in there, another process (or none) out here. So a command
writes its PID namespace beside a pid (``NS``: ``echo $$ NS > file``) and ``outer`` finds
that process out here: the one in that namespace with that pid there (``NSpid``).

Why a said pid is checked against when it was said: neither number names a process for
good. The kernel gives a freed PID namespace's number (its ``pid:[N]`` inode) to the next
namespace made, within a second (the lowest free one), and every namespace numbers its
processes from 1: so once the namespace a file names is gone, ``PID NS`` names whichever
process holds that small pid in the next command's namespace: another test's shell, on
the other xdist worker as often as not. A test's cleanup that killed "the command it
started" by such a mapping SIGKILLed another test's fresh shell or MCP server (the CI reds
of sessions 30 and 31: seen in a kernel trace in session 32, an xdist worker's
``killpg`` landing on the other worker's Bash command). A pid out here wraps too (every
~10 minutes in a whole run). The process named was running when it was said, so one that
started after that is another: ``outer`` says ``GONE`` of it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

NS = "$(readlink /proc/$$/ns/pid)"
"""Shell words for the command's PID namespace (written after the pid)."""
GONE = 2**22 + 1
"""What ``outer`` says of a process no longer found: above the kernel's largest pid
(``PID_MAX_LIMIT``), so no process has it and a signal to it reaches nobody. Never a
number <= 0: a test's cleanup ``os.kill``s what it read, and ``kill(-1, SIGKILL)`` as root
kills every process of the machine (seen: this helper said -1 once)."""
TICK_S = 1 / os.sysconf("SC_CLK_TCK")
"""The grain of a process's start time in ``/proc/PID/stat`` (its 22nd field)."""
SLACK_S = 2 * TICK_S + 0.01
"""Allowed between a process's start and the moment it was said, for the clocks' readings:
the start is a boot-clock tick, the moment a wall-clock time (two readings apart)."""


def outer(said: str, said_at: float | None = None) -> int:
    """The pid out here of what a command wrote (``PID`` or ``PID NS``); ``GONE`` when that
    namespace holds no such process any more, or when the process holding it started after
    ``said_at`` (a wall-clock time: when the text was written, its file's mtime): another
    process, in a namespace or under a number reused since. Without ``said_at`` (a text just
    answered by a live process) it is not checked."""
    fields = said.split()
    inner = int(fields[0])
    if inner <= 0:
        raise ValueError(f"not a pid: {said!r}")
    found = _found(inner, fields[1] if len(fields) > 1 else None)
    if found == GONE or said_at is None:
        return found
    started = _started_at(found)
    return found if started is not None and started <= said_at + SLACK_S else GONE


def _found(inner: int, namespace: str | None) -> int:
    """The pid out here of ``inner`` in ``namespace`` (None: ours); ``GONE`` if none."""
    if namespace is None or namespace == os.readlink("/proc/self/ns/pid"):
        return inner
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.readlink(entry / "ns" / "pid") != namespace:
                continue
            status = (entry / "status").read_text()
        except OSError:
            continue
        line = next((x for x in status.splitlines() if x.startswith("NSpid:")), "")
        if line.split()[-1:] == [str(inner)]:
            return int(entry.name)
    return GONE


def _started_at(pid: int) -> float | None:
    """When ``pid`` started, as a wall-clock time (None: no such process). Its start is a
    boot-clock reading (``/proc/PID/stat``'s 22nd field, in ticks), set on the wall clock
    by the two clocks' difference now."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
        ticks = int(stat[stat.rindex(b")") + 2 :].split()[19])
    except (OSError, ValueError, IndexError):
        return None
    booted = time.time() - time.clock_gettime(time.CLOCK_BOOTTIME)
    return booted + ticks * TICK_S


def pid_in(pidfile: Path) -> int:
    """``outer`` of what ``pidfile`` holds (written already), said when the file was last
    written."""
    return outer(pidfile.read_text(), pidfile.stat().st_mtime)
