"""A command's reaper when it is not the runtime's child: addressed by a pidfd.

Why the reaper is not the runtime's child: Ray, ending a lost driver's node host, SIGKILLs the
host's direct children. When those were the reapers, each took its shell with it
(``PR_SET_PDEATHSIG``) but the daemons the command had started went on under init, with
nobody left to kill them. So the launcher forks once more at its start (``reaper.detach``):
its first process, the runtime's child, ends at once, and the reaper, re-parented to init
(or to the nearest subreaper above the runtime), is out of reach of a kill of the runtime's
children; the runtime's end still stops it (its lifeline, the status pipe).

Where the command gets a PID namespace of its own (``reaper_ns``) the reaper is its init, and
a SIGKILL of it would end every daemon of the command (the kernel's): the detaching is kept
all the same, merged into the namespace's fork (the first process says the init's pid and
ends; no second fork), so that a kill of the host's children still leaves the command its
graceful stop through the lifeline (SIGTERM, the grace), and one path serves where
namespaces are refused.

The runtime then knows the reaper by its pid, said first on the status pipe (``pid N``), and
holds it by a pidfd (``os.pidfd_open``): signals go to the process itself, never to a number
another process may have taken, and the pidfd reads as ready when it has ended. Taken only
while the reaper is known to be alive: after the pidfd is opened, the status pipe has a
writer still (its write end is the reaper's alone: close-on-exec, its shell's copy closed
by ``exec``), so the pidfd names the reaper and not a process that took its pid after it.
Its exit code is what it said (``exit N``): it is not the runtime's child, so nothing can
``wait`` for it (init reaps it: no zombie of ours).

Only where something kills the runtime's children: a cluster's node host (Ray's worker)
turns it on (``allow``). Elsewhere the reaper stays the runtime's child, which reaps it: a
detached reaper is reaped by PID 1, and where PID 1 never reaps (a container whose PID 1 is
``sleep infinity`` and the runtime ``docker exec``-ed into it) each command would leave a
zombie, one pid each for good. Not detached either without ``pidfd_open`` (Linux before
5.3), nor in a runtime that is PID 1 (a container's), where every orphan, the reaper
included, comes back to the runtime, which would never reap it.
"""

from __future__ import annotations

import contextlib
import math
import os
import select
import signal
import time

PID_LINE = b"pid "
"""The first thing a detached reaper says: its pid."""


_ALLOWED = [False]
"""Whether this process's commands' reapers may be detached (``allow``)."""


def allow() -> None:
    """Start this process's commands' reapers detached from now on (where ``detaches``):
    called by a cluster's node host, whose children Ray kills when it ends a lost driver's
    hosts (see the module)."""
    _ALLOWED[0] = True


def detaches() -> bool:
    """Whether commands' reapers are started detached in this process (see the module)."""
    if not _ALLOWED[0] or os.getpid() == 1 or not hasattr(os, "pidfd_open"):
        return False
    try:
        os.close(os.pidfd_open(os.getpid()))
    except OSError:
        return False
    return True


class DetachedReaper:
    """A detached reaper's pidfd: its signals and its end. The pidfd stays open until this
    object is dropped (never while another thread may poll or signal through it: a closed
    fd's number may be another file's by then); polling or signalling an ended process's
    pidfd is harmless (ready; ``ESRCH``)."""

    def __init__(self, pid: int, pidfd: int) -> None:
        self.pid = pid
        """Its pid (for a look in /proc; the runtime never signals it by this number)."""
        self._fd = pidfd
        self._ended = pidfd < 0
        self._close = os.close  # held: at the interpreter's end ``os`` may be gone first

    def ended(self) -> bool:
        """Whether it has ended (never blocks)."""
        return self.wait(0)

    def wait(self, timeout: float) -> bool:
        """Wait ``timeout`` seconds at most for its end; whether it ended."""
        if not self._ended and _ready(self._fd, timeout):
            self._ended = True
        return self._ended

    def send(self, signo: int) -> None:
        """``signo`` to it, unless it has ended. Where ``pidfd_send_signal`` is refused (a
        seccomp filter that allows ``pidfd_open`` but answers this call ``EPERM`` or
        ``ENOSYS``, as container runtimes' default profiles did before they knew it) by its
        number, checked as ``group_leader.signal_checked`` does: only while its pidfd says it
        lives (then the number is still its own; a window of two calls, not minutes). Raised
        before, such a refusal broke every detached stop of a node host."""
        if self._ended:
            return
        try:
            signal.pidfd_send_signal(self._fd, signo)
        except ProcessLookupError:
            return
        except OSError:  # refused: by its number while it lives (see above)
            if not self.wait(0):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(self.pid, signo)

    def __del__(self) -> None:
        if self._fd >= 0:
            self._close(self._fd)
            self._fd = -1


def held(status_fd: int, timeout_s: float | None = None) -> tuple[DetachedReaper, bytes] | None:
    """The detached reaper, which says its pid first on ``status_fd`` (read until it does,
    or the pipe ends: it was killed first), and what it said after that line; None when it
    never said its pid. Its first process has ended (detached) when this is called: the
    reaper has been forked, and a live one says its pid before anything else, at once;
    ``TimeoutError`` when it has not within ``timeout_s`` (None: no bound), a reaper
    stopped (``kill -STOP`` by another process of the user) or stuck."""
    said = b""
    until = None if timeout_s is None else time.monotonic() + timeout_s
    while b"\n" not in said:
        if until is not None and not _ready(status_fd, until - time.monotonic()):
            raise TimeoutError(f"the reaper did not say its pid within {timeout_s:g} s")
        piece = os.read(status_fd, 256)
        if not piece:
            return None
        said += piece
    first, rest = said.split(b"\n", 1)
    if not first.startswith(PID_LINE) or not first[len(PID_LINE) :].isdigit():
        return None
    pid = int(first[len(PID_LINE) :])
    try:  # another error (EMFILE) is raised: the reaper runs on, and only its pidfd is missing
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:  # ended already
        return DetachedReaper(pid, -1), rest
    if _hung_up(status_fd):  # it ended: the pidfd may name another process
        os.close(pidfd)
        return DetachedReaper(pid, -1), rest
    return DetachedReaper(pid, pidfd), rest


def _ready(fd: int, timeout_s: float) -> bool:
    """Whether ``fd`` reads as ready within ``timeout_s`` (``poll``: any fd number)."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(max(0, math.ceil(timeout_s * 1000))))  # (never -1: for ever)


def _hung_up(read_end: int) -> bool:
    poller = select.poll()
    poller.register(read_end, select.POLLIN)
    return any(events & select.POLLHUP for _, events in poller.poll(0))
