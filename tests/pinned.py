"""A process a test may kill in its cleanup, held by a pidfd taken while its pid was surely it.

Why: a cleanup that kills a number it read earlier (a command's pid a file said, a daemon's)
kills whichever process has that number by then. A loaded run wraps its pids within minutes
(CI: ``pid_max`` 32768), and the number may by then be another test's process, the other
xdist worker's, or another user's; ``os.killpg(os.getpgid(pid))`` of a reused number even
kills the newcomer's whole group. A pidfd names the process, not the number: opened while
the process is known to be the one meant (right after it said its pid, seen alive), a signal
through it reaches that process or nobody (``ProcessLookupError`` once it has ended).
"""

from __future__ import annotations

import contextlib
import os
import signal

PIDFD_SIGNAL_PROCESS_GROUP = 4
"""``pidfd_send_signal``'s flag (Linux 6.9): the signal goes to the process group the pidfd's
process leads (Python names no constant for it)."""


def pin(pid: int) -> int:
    """A pidfd of ``pid``, opened now; -1 when no process has it any more (then nothing is
    to be killed). Never asked of 0 or below (``kill(0)``/``kill(-1)`` name groups)."""
    assert pid > 0, pid
    try:
        return os.pidfd_open(pid)
    except ProcessLookupError:
        return -1


def kill_pinned(pidfd: int, *, group: bool = False) -> None:
    """SIGKILL the process ``pidfd`` holds (``group``: the group it leads, where the kernel
    can: else the process alone), nothing if it has ended; the pidfd is closed."""
    if pidfd < 0:
        return
    try:
        if group:
            try:
                signal.pidfd_send_signal(pidfd, signal.SIGKILL, None, PIDFD_SIGNAL_PROCESS_GROUP)
                return
            except OSError:  # EINVAL: a kernel before 6.9; ESRCH: no group it leads (it left
                pass  # it, or ended): the process alone (ESRCH again if it ended)
        with contextlib.suppress(ProcessLookupError):
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    finally:
        os.close(pidfd)
