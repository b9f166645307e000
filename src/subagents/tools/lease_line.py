"""The lease line: the deadline by which every process a host's runs started must be dead
unless its lease was renewed, published for their reapers.

Why: a host stalled past its lease (SIGSTOP, a swapped-out VM) has its runs taken over by
another runtime (``subagents resume``), which goes on in the same workspace. The store
refuses the stalled host's writes (``store.fencing``), but a Bash command of its runs is a
process of its own, held by a reaper that is not stopped with the host: it went on acting on
the workspace until the host woke, found itself fenced and killed it. Two holders then acted
on one workspace. The host cannot help (it is stopped), so each reaper must know, by itself,
when its host's lease may be gone.

How: the lease keeper, before each renewal's write, reads ``CLOCK_BOOTTIME`` (one clock for
every process of a kernel boot, never stepped, and the clock a lease's ``expires_boot`` is
on: ``store.leases``), and once the renewal succeeded publishes that reading plus the lease
minus a margin (``deadline``): earlier than any moment another process can find the lease
lapsed. Each reaper reads the line again whenever it wakes, sleeps no later than the deadline
it read, and kills all its command started when the deadline passes without a renewal
(``reaper.lease_left``). A renewal that fails publishes nothing: the commands die a margin
before the lease itself would lapse.

The line is one small file with no name: made (``0600``) and unlinked at once, it is held
by two descriptors of the runtime's, one to write it and one read-only that each launcher
inherits (``Popen(pass_fds=...)``, its number in the launcher's environment:
``reaper.LEASE_VARIABLE``, taken out before its command starts, and the descriptor made
close-on-exec there, so the command gets neither). Why no name (last read of session 27): a
named file in the temp directory could be found and rewritten by a run whose sandbox may write
there (``Sandbox(writable=["/tmp"])``: it kept its commands alive past the line, or killed a
whole runtime's), and a host killed with SIGKILL left its file behind for good. It is rewritten
in place, never replaced: its 16 bytes are the deadline in nanoseconds twice; a reader that
finds the halves differ (it read during a write) reads again (``reaper._deadline``).
Bash commands, background shells and hooks' commands get the line (``ProcessGroups.lease_env``),
and since session 28 stdio MCP servers too (``McpHub.lease_env``): a server's tool call in
flight (a migration, a deploy, a watcher it started) went on acting on the workspace while
the stalled host's runs were taken over, as a Bash command did. The mcp SDK that starts a
server passes no descriptor, so its reaper is given the line by a path naming the runtime's
read-only descriptor, ``/proc/<pid>/fd/<n>`` (``named_environment``, as its status pipe is
named: ``held.named_status``), opened before the sandbox restricts it: no file names it, and
a sandboxed process may not open another process's ``/proc/<pid>/fd`` links (Landlock's
ptrace scope). Where that link is not this user's (a runtime made non-dumpable) a server
gets no line (logged at its start). The server, when its line passes, dies with everything
it started: its run's next call finds it dead (``McpServerError``).

A host that was only slow (not stopped) past the line loses its commands (the model sees a
command killed by SIGKILL) while its lease, lapsed, is anyone's: its writes are refused if
another took its runs, and a renewal that still succeeded lets its runs go on.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
import time
from collections.abc import Mapping

from subagents.tools import reaper

MARGIN_S = 1.0
"""At most this much before the lease's own lapse the commands die (a quarter of the lease
when it is shorter): the time a reaper has to wake and kill before anyone may take over."""


def deadline(lease_s: float, before: float) -> float:
    """The line for a renewal whose write began after ``before`` (a ``clock()`` reading)."""
    return before + lease_s - min(lease_s / 4, MARGIN_S)


def clock() -> float:
    """Seconds on the clock the reapers read (``reaper.lease_clock``)."""
    return time.clock_gettime(reaper.LEASE_CLOCK)


class LeaseLine:
    """The file a runtime publishes its lease line in, for its commands' reapers."""

    def __init__(self, directory: str | None = None) -> None:
        fd, path = tempfile.mkstemp(prefix="subagents-lease-", dir=directory)
        try:
            self.reader = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except BaseException:
            os.close(fd)
            raise
        finally:
            os.unlink(path)  # no name: nothing to find, nothing left by a killed host
        self._fd: int | None = fd
        self._at: float | None = None
        self._lock = threading.Lock()

    @property
    def environment(self) -> dict[str, str]:
        """What a launcher's environment carries for it to find the line: the number of the
        read-only descriptor it inherits (``fds_of``)."""
        return {reaper.LEASE_VARIABLE: str(self.reader)}

    @property
    def named_environment(self) -> dict[str, str]:
        """The same for a launcher its starter passes no descriptor to (the mcp SDK's): the
        ``/proc`` link of the read-only descriptor, which the reaper opens (``reaper.
        hold_lease``); empty where that link is not this user's, or not this process's
        descriptor (a ``/proc`` mounted for another PID namespace names another process:
        review of session 28, a runtime in ``unshare --pid`` named its outer pid 1's and
        no server started)."""
        fds = f"/proc/{os.getpid()}/fd"
        try:
            ours = os.stat(fds).st_uid == os.geteuid()  # a non-dumpable process's are root's
            # (and this process's: a /proc of another PID namespace names someone else's)
            named, held = os.stat(f"{fds}/{self.reader}"), os.fstat(self.reader)
            ours = ours and (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)
        except OSError:
            ours = False
        return {reaper.LEASE_VARIABLE: f"{fds}/{self.reader}"} if ours else {}

    def publish(self, at: float) -> None:
        """Say the deadline ``at`` (a ``clock()`` reading); nothing once closed."""
        half = round(at * 1e9).to_bytes(8, "little")
        with self._lock:
            if self._fd is not None:
                os.pwrite(self._fd, half + half, 0)
                self._at = at

    def left(self) -> float | None:
        """Seconds until the line last published (negative once it passed), on ``clock()``;
        None before the first or once closed: what a node host of the runtime asks for, to
        keep the same line on its machine (``cluster/node_lease.py``)."""
        with self._lock:
            at = self._at if self._fd is not None else None
        return None if at is None else at - clock()

    def close(self) -> None:
        """Let the line go (every command of the runtime has been killed by now)."""
        with self._lock:
            fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.close(self.reader)


def fds_of(environment: Mapping[str, str] | None) -> tuple[int, ...]:
    """The descriptors a launcher given ``environment`` must inherit: the line's, if it names
    one (``LeaseLine.environment``)."""
    given = (environment or {}).get(reaper.LEASE_VARIABLE)
    return (int(given),) if given and given.isdigit() else ()  # (a path: nothing to pass)
