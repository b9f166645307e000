"""Processes that are not Bash commands, held by the reaper all the same: hooks' commands and
stdio MCP servers.

Why: a hook's command or an MCP server may start daemons that leave its process group
(``setsid``, a double fork): a kill of the group missed them, and they outlived the hook's
timeout, the server's session and the runtime. Under the reaper (``tools/reaper.py``, the
launcher Bash commands run under) every process they start is the reaper's descendant, killed
when the command ends (a hook's end or timeout, a server's exit at its session's end), and when
the runtime dies (its lifeline: the status pipe, whose read end only the runtime holds).

The reaper passes its command's stdin, stdout and stderr through untouched (it gives its own
to ``/dev/null`` once the command has them), so a hook's JSON and an MCP server's stream
are as without it. How the reaper is given its status pipe: a hook is started here, which
passes the pipe's write end by number (``--status-fd``); an MCP server is started by the
mcp SDK, which passes no descriptor to it, so it is named by path (``--status-path``): the
runtime's own write end's ``/proc/PID/fd/N`` (``named_status``), which the reaper opens for
writing (a new write end of the same pipe) before its command starts. No file names it
(session 25's FIFO had a name: a sandboxed command of another run could open it for reading
in the instant before the reaper removed it, and hold the lifeline open); a ``/proc/PID/fd``
link is opened only by what may ``ptrace``-read the runtime, which Landlock refuses every
sandboxed command. Not an unsandboxed process of the same user: it may open a read end
through that link (or the read end's own, as it always could) at any time, and ``ptrace``
the runtime anyway; the lifeline is closed to sandboxed commands only. Where that link is
not this user's (a runtime made non-dumpable), a FIFO as before
(``status_fifo``). Their command lines are Bash's (``processes.held_argv``).
"""

from __future__ import annotations

import contextlib
import math
import os
import select
import signal
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from subagents.tools.detached import DetachedReaper
from subagents.tools.detached import held as detached_held
from subagents.tools.group_leader import GroupLeader
from subagents.tools.process import exit_in, popen_ended_within, stop_reaper
from subagents.tools.processes import HELD_WAIT_S, HOLDS, KILL_GRACE_S
from subagents.tools.reaper import STOPPED


def status_pipe() -> tuple[int, int]:
    """A status pipe (read end, write end; close-on-exec both: the write end is passed by
    ``pass_fds``), or (-1, -1) where commands are not held."""
    return os.pipe() if HOLDS else (-1, -1)


def status_fifo() -> tuple[int, Path | None]:
    """A status FIFO for a reaper its starter cannot pass a descriptor to (the mcp SDK's
    spawn): its read end, opened now (non-blocking: no writer yet), and its path in a
    private directory of its own (removed by ``close_fifo``); (-1, None) where not held."""
    if not HOLDS:
        return -1, None
    where = Path(tempfile.mkdtemp(prefix="subagents-held-"))
    path = where / "status"
    try:
        os.mkfifo(path, 0o600)
        return os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC), path
    except BaseException:
        close_fifo(-1, path)
        raise


@dataclass(frozen=True)
class NamedStatus:
    """A status pipe named by a path, for a reaper its starter passes no descriptor to."""

    read_end: int
    """The runtime's (non-blocking): the reaper's lifeline."""
    path: str
    """What the reaper opens for writing (``--status-path``)."""
    write_end: int = -1
    """The runtime's own write end, whose ``/proc`` link ``path`` is (-1: a FIFO)."""
    fifo: Path | None = None
    """The FIFO's name, where one was made instead (removed at the end)."""

    def close(self) -> None:
        """Close the runtime's ends (the read end last: the lifeline of a reaper still
        running) and remove what is left of a FIFO."""
        if self.write_end >= 0:
            os.close(self.write_end)
        close_fifo(self.read_end, self.fifo)


def named_status() -> NamedStatus | None:
    """A status pipe for a reaper its starter cannot pass a descriptor to (the mcp SDK's
    spawn), named by no file: its write end's ``/proc`` link (see the module); a FIFO where
    that link is not this user's; None where commands are not held."""
    if not HOLDS:
        return None
    read_end, write_end = os.pipe()  # (close-on-exec both: the link needs no inheriting)
    os.set_blocking(read_end, False)
    fds = f"/proc/{os.getpid()}/fd"
    try:
        ours = os.stat(fds).st_uid == os.geteuid()  # a non-dumpable process's are root's
    except OSError:
        ours = False
    if ours:
        return NamedStatus(read_end, f"{fds}/{write_end}", write_end)
    os.close(read_end)
    os.close(write_end)
    fifo_end, fifo = status_fifo()
    return NamedStatus(fifo_end, str(fifo), fifo=fifo) if fifo is not None else None


SESSION_END_S = 2.0
"""How long a detached MCP server's reaper gets to end by itself at its session's end (the
server ends at its stdin's end; the SDK gives its own process as long) before it is stopped
(``end_detached``)."""


def heard_until_hung_up(read_end: int, timeout_s: float) -> tuple[bool, bytes]:
    """Whether every writer of the status pipe or FIFO ``read_end`` (non-blocking) is gone
    within ``timeout_s`` (the reaper ended, having killed all it held), and what it said
    meanwhile (``exit N``: a detached server's end,
    ``mcp/connection.py``, which nobody else reads)."""
    poller = select.poll()
    poller.register(read_end, select.POLLIN)  # (POLLHUP is reported all the same)
    until = time.monotonic() + timeout_s
    said = b""
    while True:
        left = until - time.monotonic()
        for _, events in poller.poll(max(0, math.ceil(left * 1000))):
            if events & select.POLLIN:
                with contextlib.suppress(BlockingIOError):
                    if piece := os.read(read_end, 4096):
                        said += piece
                        continue  # what it said: read on
            if events & (select.POLLHUP | select.POLLERR):
                return True, said
        if left <= 0:
            return False, said


def heard(read_end: int) -> bytes:
    """What a reaper said on the status pipe ``read_end`` that nobody has read yet (an MCP
    server's, whose end nobody waits for: ``mcp/connection.py``); read only while it polls
    readable, so it never blocks, and an error ends it (what was read is kept)."""
    said = b""
    poller = select.poll()
    poller.register(read_end, select.POLLIN)
    with contextlib.suppress(OSError):
        while any(events & select.POLLIN for _, events in poller.poll(0)):
            piece = os.read(read_end, 4096)
            if not piece:
                break
            said += piece
    return said


def how_it_ended(said: bytes) -> str | None:
    """How a held command ended, in words, from what its reaper ``said`` (``exit N``, ``-SIG``
    for a signal: ``reaper.run``): "exit status 1", "killed by SIGKILL"; "stopped by the
    runtime: killed by SIGTERM" when a stop reached its reaper before it ended (``reaper``'s
    ``stopped``: the runtime's close, not the command's own end; "stopped by the runtime"
    alone when the reaper was killed before it said the end, the SDK's SIGKILL past its
    grace); None when it said no end (it has not ended, or the reaper itself was killed
    first)."""
    code = exit_in(said)
    if code is None:
        return "stopped by the runtime" if stopped_first(said) else None
    if code >= 0:
        how = f"exit status {code}"
    else:
        try:
            how = f"killed by {signal.Signals(-code).name}"
        except ValueError:
            how = f"killed by signal {-code}"
    return f"stopped by the runtime: {how}" if stopped_first(said) else how


def stopped_first(said: bytes) -> bool:
    """Whether a reaper said it was stopped (``reaper.STOPPED``) before its command's end."""
    for line in said.split(b"\n")[:-1]:
        if line == _STOPPED:
            return True
        if line.startswith(b"exit "):
            return False
    return False


_STOPPED = STOPPED.encode()


def end_detached(read_end: int, until: float | None = None) -> tuple[bytes, bool]:
    """End a detached MCP server's reaper at its session's end (``mcp/connection.py``, its
    status pipe's other write ends closed), and return once all it held is dead (every
    writer of ``read_end`` gone: the reaper closes its own end after killing and reaping
    all): first ``SESSION_END_S`` for it to end by itself (the server ends at its stdin's
    end); then the stop every held command gets (``process.stop_reaper``: SIGTERM by its
    pidfd, its grace, all killed; SIGKILL past ``HELD_WAIT_S``, a hang guard). Closing the
    status pipe (its lifeline) stopped it too, but nothing could wait for that: the server
    and its daemons ran on after the hub's close returned (session 30: seen under load).
    Every wait ends by ``until`` (``time.monotonic``; None: no bound), the hub's close's own
    end (its ``timeout``: the waits above alone take up to 14.5 s, past its 10 s): a reaper
    still running then has its stop (SIGTERM) and is not waited for, nor killed (its grace,
    then its kill of all it holds, go on; the lifeline, closed next, stops it too).
    A reaper that never said its pid (it failed before, or is stopped: ``detached.held``'s
    bound), or whose pidfd could not be opened, is left to its lifeline, closed by the
    caller. What the reaper said after its pid (``exit N``: ``how_it_ended``), and whether
    all it held is known dead."""
    try:
        found = detached_held(read_end, _within(SESSION_END_S, until))
    except (TimeoutError, OSError):
        return b"", False
    if found is None:  # the pipe ended: it failed before (or killed itself)
        return b"", True
    reaper, said = found
    ended, more = heard_until_hung_up(read_end, _within(SESSION_END_S, until))
    said += more
    if ended:
        return said, True

    def ended_within(timeout_s: float) -> bool:
        nonlocal said, ended
        ended, more = heard_until_hung_up(read_end, timeout_s)
        said += more
        return ended

    grace = _within(HELD_WAIT_S, until)
    kill = _within(KILL_GRACE_S, until)
    stop_reaper(reaper.send, ended_within, grace, kill, hang_guard=grace >= HELD_WAIT_S)
    return said, ended


def _within(limit_s: float, until: float | None) -> float:
    """``limit_s``, or less so as to end by ``until`` (None: no bound)."""
    return limit_s if until is None else max(0.0, min(limit_s, until - time.monotonic()))


def close_fifo(read_end: int, path: Path | None) -> None:
    """Close a status FIFO's read end (the reaper's lifeline: a reaper still running stops
    its command) and remove what is left of it."""
    if read_end >= 0:
        os.close(read_end)
    if path is not None:
        with contextlib.suppress(OSError):
            path.unlink()
        with contextlib.suppress(OSError):
            path.parent.rmdir()


def stop_held(leader: GroupLeader, reaper: DetachedReaper | None = None) -> None:
    """End a held command and all it started (``process.stop_reaper``, as a Bash command's
    end: SIGTERM, SIGKILL if it did not end within ``HELD_WAIT_S``). The reaper is
    ``leader``'s (its group's, reached through its pidfd: ``group_leader``), or ``reaper``
    when it is detached (``tools/detached.py``: reached by its pidfd, never by a number)."""
    if reaper is not None:
        if not reaper.ended():
            stop_reaper(reaper.send, reaper.wait, HELD_WAIT_S, KILL_GRACE_S)
    elif leader.popen.poll() is None:
        ended_within = popen_ended_within(leader.popen)
        stop_reaper(leader.signal, ended_within, HELD_WAIT_S, KILL_GRACE_S)


def said_exit(status_fd: int, said: bytes, timeout_s: float) -> int | None:
    """The command's exit code as its detached reaper says it (``exit N``, after ``said``,
    read on): it is not this process's child, so nothing can ``wait`` for it. None when it
    ends without saying (killed) or has not said within ``timeout_s``."""
    poller = select.poll()
    poller.register(status_fd, select.POLLIN)
    until = time.monotonic() + timeout_s
    while True:
        if (code := exit_in(said)) is not None:
            return code
        left = until - time.monotonic()
        if left <= 0 or not poller.poll(math.ceil(left * 1000)):
            return None
        try:
            piece = os.read(status_fd, 256)
        except BlockingIOError:
            continue
        if not piece:
            return None
        said += piece
