"""Strays: the processes of a command that left its group, found by its mark.

Why apart from ``processes``: where the reaper did not say all is gone (it was killed; not
Linux), a kill falls back to the command's group and to a mark: every command's processes
carry a cookie in their environment (``TREE_COOKIE``, unique per command), which a new
session and a fork keep, and whatever still runs with it is found in Linux's ``/proc`` and
killed (``kill_strays``); what clears its environment escapes that. Each kill is by pidfd,
re-checked: a stray is not our child, and its pid may be another's by the time of the kill.
"""

from __future__ import annotations

import contextlib
import os
import signal

TREE_COOKIE = "SUBAGENTS_PROCESS_TREE"
"""The environment variable naming the command a process belongs to (``kill_strays``)."""
STRAY_PASSES = 8
"""At most this many looks through /proc per kill (``kill_strays``)."""


def kill_strays(cookie: str, since: int = 0) -> None:
    """SIGKILL every process whose environment holds ``cookie`` (those that left the group);
    nothing where there is no ``/proc``. Only processes started at or after ``since`` (clock
    ticks since boot: the command's start) are read: reading a process's environment waits
    for its memory lock, which a process stuck in the kernel (D state) may hold for good; so
    only the command's own descendants (and whatever else started since) can make it wait. A
    process that ends meanwhile, its pid taken by another, is let be (``_kill_if_marked``).
    Looked for again while a pass finds some (one may fork while the pass reads /proc), up to
    ``STRAY_PASSES`` passes. About 15 us of CPU per process on the machine per pass."""
    if not cookie:
        return
    mark = f"\0{TREE_COOKIE}={cookie}\0".encode()
    for _ in range(STRAY_PASSES):
        try:
            names = os.listdir("/proc")
        except OSError:
            return
        found = [
            name
            for name in names
            if name.isdigit() and start_time(name) >= since and mark in _environ(name)
        ]
        if not found:
            return
        for pid in found:
            _kill_if_marked(pid, mark)


def _kill_if_marked(pid: str, mark: bytes) -> None:
    """SIGKILL ``pid`` if it is still the process whose environment holds ``mark``. Why a
    pidfd: a stray has left our tree, so it is not our child; it may end after the look
    through /proc and its pid be taken by another process before the kill. A pidfd names
    the process, not the number: opened first, the environment read again through /proc
    (still that process, or one without ``mark``), the signal sent to it or to nobody."""
    try:
        pidfd = os.pidfd_open(int(pid))
    except OSError:  # ended already (or no pidfd on this kernel: a plain kill, re-checked)
        if mark in _environ(pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(pid), signal.SIGKILL)
        return
    try:
        if mark in _environ(pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    finally:
        os.close(pidfd)


def start_time(pid: str) -> int:
    """When ``pid`` started, in clock ticks since boot (``/proc/PID/stat``'s 22nd field);
    -1 when it cannot be read (ended), so it is let be. Reading ``stat`` takes no lock on the
    process's memory, unlike ``environ``."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat_line = f.read()
        return int(stat_line[stat_line.rindex(b")") + 2 :].split()[19])
    except (OSError, ValueError, IndexError):
        return -1


def _environ(pid: str) -> bytes:
    """``pid``'s environment as ``\\0``-framed entries (empty if it cannot be read)."""
    try:
        fd = os.open(f"/proc/{pid}/environ", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return b""
    parts = [b"\0"]
    try:
        while piece := os.read(fd, 65536):
            parts.append(piece)
    except OSError:
        return b""
    finally:
        os.close(fd)
    parts.append(b"\0")
    return b"".join(parts)
