"""Process: a command started by ``ProcessGroups`` (``processes``), what its reaper said, and
how the runtime reaches the reaper: its end, its exit code, its signals (by the pidfd of a
detached reaper, ``detached``, or to the group of the runtime's child: ``group_leader``)."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from subagents.tools.detached import DetachedReaper
from subagents.tools.group_leader import GroupLeader, signal_checked


@dataclass
class Process:
    """A started command: its process (the group leader), output file and owner."""

    id: str
    command: str
    run_id: str
    popen: subprocess.Popen[bytes]
    output: Path
    started_at: float = field(default_factory=time.monotonic)
    read_offset: int = 0
    """For a background shell: how much output BashOutput has already shown."""
    killed: str | None = None
    """Why the runtime killed it (None if it ended by itself)."""
    cookie: str = ""
    """The value of ``TREE_COOKIE`` in its processes' environment."""
    reaped: bool = False
    """Whether what it left (its group, its cookie's strays) was killed."""
    dropped: bool = False
    """Whether some of its output was dropped (the pipe closed after): past the output cap,
    or its file could not be written (``cut``)."""
    cut: str = ""
    """Why its output was cut short of the cap (a write error: a full disk); empty if not."""
    drained: threading.Event = field(default_factory=threading.Event)
    """Set when its output is all in the file (the pipe's writers gone, or the cap reached)."""
    since: int = 0
    """When its shell started, in clock ticks since boot (``/proc/PID/stat``): its strays,
    its descendants, started at or after it (``strays.kill_strays`` looks at no older process)."""
    status_fd: int = -1
    """The read end of the reaper's status pipe (-1: no reaper, or read to its end)."""
    said: bytes = b""
    """What the reaper said on it: ``exit N`` when the shell ended, ``reaped`` when all is."""
    detached: DetachedReaper | None = None
    """The reaper when it is not the runtime's child (``tools.detached``); None: ``popen``."""
    leader: GroupLeader | None = None
    """``popen``'s group, held by its pidfd from its start (``group_leader``); None: by its
    number, checked."""
    _hearing: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def pgid(self) -> int:
        return self.popen.pid

    @property
    def reaper_pid(self) -> int:
        """The reaper's pid (``popen``'s when it is not detached)."""
        return self.popen.pid if self.detached is None else self.detached.pid

    def poll(self) -> int | None:
        """The reaper's end (as its shell's: ``exit N``; ``-SIGKILL`` when a detached one
        ended without saying), None while it runs."""
        if self.detached is None:
            return self.popen.poll()
        return self._said_end() if self.detached.ended() else None

    def wait(self, timeout: float) -> int:
        """Wait for the reaper's end, ``timeout`` seconds at most (``TimeoutExpired``)."""
        if self.detached is None:
            return self.popen.wait(timeout=timeout)
        if not self.detached.wait(timeout):
            raise subprocess.TimeoutExpired(self.command, timeout)
        return self._said_end()

    def ended_within(self, timeout: float) -> bool:
        """Whether the reaper ends within ``timeout`` seconds (``wait``, as a yes or no)."""
        try:
            self.wait(timeout)
        except subprocess.TimeoutExpired:
            return False
        return True

    def signal_reaper(self, signo: signal.Signals) -> None:
        """``signo`` to the reaper: by its pidfd, or to its group (the runtime's child's)
        through its leader's pidfd opened at its start (``group_leader``: never a group
        another process leads by the same number once the launcher is reaped; session 30:
        a command killed again at its run's end or the runtime's close,
        ``ProcessGroups._reap_left``, so SIGKILLed whichever group had its launcher's
        number then); without ``leader`` (a kernel before 6.9, no pidfd), by its number
        while that is still its group's (``group_leader.signal_checked``)."""
        if self.detached is not None:
            self.detached.send(signo)
        elif self.leader is not None:
            self.leader.signal(signo)
        else:
            signal_checked(self.popen, signo)

    def exit_code(self) -> int | None:
        """The shell's exit code, None while it runs: with ``run_in_background`` the reaper
        outlives it while a daemon it started runs, so the reaper says when it ended."""
        said = self._said_exit()
        return said if said is not None else self.poll()  # no reaper, or one killed early

    def _said_exit(self) -> int | None:
        return exit_in(self._heard())

    def _said_end(self) -> int:
        """An ended detached reaper's code: its shell's, as it said; killed if it did not."""
        said = self._said_exit()
        return -signal.SIGKILL if said is None else said

    def contained(self) -> bool:
        """Whether its reaper ended having killed everything the command started (nothing
        can be left: every process it started was its descendant)."""
        return self.poll() is not None and b"reaped\n" in self._heard()

    def _heard(self) -> bytes:
        with self._hearing:
            while self.status_fd >= 0:
                try:
                    piece = os.read(self.status_fd, 256)
                except BlockingIOError:
                    break
                except OSError:
                    piece = b""
                if not piece:  # the reaper is gone
                    os.close(self.status_fd)
                    self.status_fd = -1
                self.said += piece
            return self.said


def exit_in(said: bytes) -> int | None:
    """The exit code a reaper said (``exit N`` on a whole line of ``said``), if it did (a
    ``stopped`` line may come first: ``reaper.STOPPED``)."""
    for line in said.split(b"\n")[:-1]:
        if line.startswith(b"exit ") and line[5:].lstrip(b"-").isdigit():
            return int(line[5:])
    return None


def popen_ended_within(popen: subprocess.Popen[bytes]) -> Callable[[float], bool]:
    """``ended_within`` for a reaper that is the runtime's child (a hook's)."""

    def ended_within(timeout: float) -> bool:
        try:
            popen.wait(timeout)
        except subprocess.TimeoutExpired:
            return False
        return True

    return ended_within


def stop_reaper(
    send: Callable[[signal.Signals], object],
    ended_within: Callable[[float], bool],
    grace_s: float,
    kill_s: float,
    *,
    hang_guard: bool = True,
) -> bool:
    """End a held command and all it started: the one way for every held process (a Bash
    command's, ``ProcessGroups.kill``; a hook's or an MCP server's, ``held.stop_held``).
    SIGTERM to its reaper (``send``), which gives the command a short grace, then kills
    everything it holds, and SIGCONT (the command may have stopped it); SIGKILL if it did not
    end within ``grace_s`` (a hang guard: what it holds may then outlive it, but for what the
    caller does after), and ``kill_s`` more for that; without ``hang_guard`` (``grace_s`` is
    the caller's own bound, shorter: the MCP hub's close, ``held.end_detached``) it is left to
    its stop, not killed. Whether it ended when asked."""
    send(signal.SIGTERM)
    send(signal.SIGCONT)
    if ended_within(grace_s):
        return True
    if not hang_guard:
        return False
    send(signal.SIGKILL)
    ended_within(kill_s)
    return False
