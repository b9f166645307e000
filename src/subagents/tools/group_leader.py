"""GroupLeader: a command's process group, signalled through a pidfd of its leader opened at
its start: never through a number another process may have taken since.

Why: every command the tools start (a Bash command's launcher, a hook's) leads a session, so
a process group, of its own, and its group is signalled at a stop, a timeout, its run's end
or the runtime's close: sometimes long after its leader was reaped (``ProcessGroups._reap_left``
kills again what a killed launcher left). A group signalled by its number (``killpg``) then
reaches whichever group has that number: pids wrap within minutes on a loaded machine
(``pid_max`` is 32768 on many), and the leader of a new session takes its pid as its group's
number (session 30: an MCP server's launcher starting in another runtime, so SIGKILLed,
"exited before answering initialize" with no stderr).

A pidfd names the process itself (the kernel's ``struct pid``), not its number: opened while
the leader is the runtime's child and not yet reaped (right after ``Popen`` returns: only a
wait reaps it), it names that leader for good. ``pidfd_send_signal`` with
``PIDFD_SIGNAL_PROCESS_GROUP`` (Linux 6.9+) signals every process of the group that leader's
pid names: after the leader was reaped too, while a member lives (a ``sleep &`` left behind,
a ``setsid`` daemon's parent that kept the group: such a group keeps its identity), and no
process at all (``ESRCH``) once all are gone, whoever has the number by then. No window.

Where the kernel does not have it (before 6.9; a seccomp filter refusing the call: found
once a process, ``kernel_signals_groups``), or no pidfd could be opened (EMFILE), the group
by its number, checked (session 30, ``signal_checked``): while the leader is not reaped (its
zombie holds the number), or after while no process has that pid (a group whose leader was
reaped but a member lives holds its number: no process can take it; an empty group's
number may be anyone's by then). The check and the kill are two calls: a process taking the
number between them is still reached (a window of two calls, not minutes).
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import subprocess

PIDFD_SIGNAL_PROCESS_GROUP = 4
"""``pidfd_send_signal``'s flag (``<linux/pidfd.h>``, Linux 6.9): the pidfd's process's
group, not the process."""


@functools.cache
def kernel_signals_groups() -> bool:
    """Whether this kernel signals a group through its leader's pidfd (asked once a process:
    the flag on this process's own pidfd, signal 0; an unknown flag is ``EINVAL``, a call a
    seccomp filter refuses ``ENOSYS`` or ``EPERM``; ``ESRCH``: known, this process leads no
    group)."""
    if not hasattr(os, "pidfd_open") or not hasattr(signal, "pidfd_send_signal"):
        return False
    try:
        own = os.pidfd_open(os.getpid())
    except OSError:
        return False
    try:
        signal.pidfd_send_signal(own, 0, None, PIDFD_SIGNAL_PROCESS_GROUP)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    finally:
        os.close(own)
    return True


class GroupLeader:
    """A started command's group, by its leader ``popen`` (a new session's: its pid is its
    group's number) and, where the kernel signals groups so, a pidfd of it (``of``). The
    pidfd stays open until this object is dropped (never while another thread may signal
    through it: a closed fd's number may be another file's by then)."""

    def __init__(self, popen: subprocess.Popen[bytes], pidfd: int = -1) -> None:
        self.popen = popen
        self._fd = pidfd
        self._close = os.close  # held: at the interpreter's end ``os`` may be gone first

    @classmethod
    def of(cls, popen: subprocess.Popen[bytes]) -> GroupLeader:
        """``popen``'s group, held by a pidfd where the kernel signals groups so: called right
        after ``Popen`` returned, before anything waits for it (the pid is still its own);
        without one (EMFILE, an older kernel) by its number, checked."""
        if not kernel_signals_groups():
            return cls(popen)
        try:
            return cls(popen, os.pidfd_open(popen.pid))
        except OSError:
            return cls(popen)

    @property
    def by_pidfd(self) -> bool:
        """Whether its signals go through its leader's pidfd (else by number, checked)."""
        return self._fd >= 0

    def signal(self, signo: int) -> None:
        """``signo`` to every process of the group (none once all are gone)."""
        if self._fd < 0:
            signal_checked(self.popen, signo)
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            signal.pidfd_send_signal(self._fd, signo, None, PIDFD_SIGNAL_PROCESS_GROUP)

    def __del__(self) -> None:
        if self._fd >= 0:
            self._close(self._fd)
            self._fd = -1


def signal_checked(popen: subprocess.Popen[bytes], signo: int) -> None:
    """``signo`` to ``popen``'s group by its number, only while that number is still its
    group's: ``popen`` not reaped, or no process has the number (see the module)."""
    if popen.returncode is None or not _taken(popen.pid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(popen.pid, signo)


def _taken(pid: int) -> bool:
    """Whether a process has ``pid`` now (a zombie too); never asked of 0 or below."""
    if pid <= 0:
        return True  # (``kill(0)``/``kill(-1)`` name groups: nothing is sent for them)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
