"""RunStarts: the commands starting, by run, and the runs whose end is under way: a run's
end kills what it started, and nothing may start behind it.

Why: a run's end (``ProcessGroups.kill_run``) listed the run's processes and killed them;
a background shell the run started meanwhile (a tool call still going when the run was
stopped) was not listed, and kept its process and its slot until the runtime closed. Now a
start of a run whose end is under way is refused (``RunEnding``), and the end waits for the
starts already under way (each bounded: a ``Popen``, the launcher's detaching) before it
lists, so it kills them too; a start that comes after the end is refused by its run's
stop (``ProcessGroups.start``'s ``cancel``, set before the end begins). The end's own
refusal lasts only while it is under way: a run restarted afterwards (its next attempt, the
same id, a cancel of its own) starts commands again. Not thread-safe by itself:
``ProcessGroups`` calls it under its lock and waits on its condition.

``RunAttempt``: one start of a run, whose processes are its own (session 27). Keyed by the
run's id, a restarted run's two attempts shared them: the earlier attempt's end runs on its
own actor's thread while the next attempt starts, and it refused (``RunEnding``) or killed
the next one's commands, and removed its directory. And a run that ended by itself (no stop:
its cancel unset) let a tool call still going start a shell after its end had listed and
killed the run's. Now each attempt lists its processes under a key of its own, and its end
(``ProcessGroups.end_attempt``) ends it for good: whatever ended the run, a later start of
the attempt is refused.
"""

from __future__ import annotations

import contextlib
import itertools
import signal
from collections import Counter

from subagents.tools.errors import ToolError


class RunEnding(ToolError):
    """A command refused: its run's end is under way (its processes being killed)."""


_ATTEMPTS = itertools.count(1)
"""Numbers the attempts of this process (``next`` on it is atomic: no lock)."""


class RunAttempt:
    """One start of a run, as its processes know it: ``key`` lists them apart from another
    attempt's (unique in this process; the run's id first, for the reader), and ``ended`` is
    set by the attempt's end (``ProcessGroups.end_attempt``, under its lock), for good: no
    command of the attempt starts after."""

    __slots__ = ("ended", "key", "run_id")

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.key = f"{run_id}#{next(_ATTEMPTS)}"
        self.ended = False

    def __repr__(self) -> str:
        return f"RunAttempt({self.key!r}, ended={self.ended})"


class RunStarts:
    """How many commands each run is starting, and which runs are ending (how many ends of
    each are under way)."""

    def __init__(self) -> None:
        self._starting: Counter[str] = Counter()
        self._ending: Counter[str] = Counter()
        self._launchers: dict[int, tuple[str, str, int]] = {}
        """A detached launcher still starting (its pidfd) -> its run, its command's mark and
        when it started (``strays.kill_strays``'s)."""

    def begin(self, run_id: str) -> None:
        """A command of ``run_id`` starts; ``RunEnding`` when the run's end is under way."""
        if self._ending[run_id]:
            raise RunEnding(
                f"run {run_id} is ending (its processes are being killed): no command may start"
            )
        self._starting[run_id] += 1

    def done(self, run_id: str) -> None:
        """A command of ``run_id`` started (it is listed) or failed to."""
        self._starting[run_id] -= 1
        if self._starting[run_id] <= 0:
            del self._starting[run_id]

    def starting(self, run_id: str) -> bool:
        """Whether a command of ``run_id`` is starting (not yet listed)."""
        return self._starting[run_id] > 0

    def end(self, run_id: str) -> None:
        """The run's end begins: no command of it may start until ``ended``."""
        self._ending[run_id] += 1

    def ended(self, run_id: str) -> None:
        self._ending[run_id] -= 1
        if self._ending[run_id] <= 0:
            del self._ending[run_id]

    def launching(self, pidfd: int, run_id: str, cookie: str, since: int, *, cut: bool) -> None:
        """A launcher of ``run_id`` (``pidfd``: open until ``launched``) detaches its reaper;
        killed at once when ``cut`` (the runtime closed) or the run's end is under way: that
        end's ``cut`` may have looked before it was listed (its start's thread slow)."""
        self._launchers[pidfd] = (run_id, cookie, since)
        if cut or self._ending[run_id] > 0:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)

    def launched(self, pidfd: int) -> None:
        """It has detached, or failed to (the caller closes ``pidfd`` after)."""
        del self._launchers[pidfd]

    def cut(self, run_id: str | None) -> list[tuple[str, int]]:
        """SIGKILL every launcher of ``run_id`` (None: every run's) still detaching (by its
        pidfd: the process itself, never a pid another took); the marks of their commands
        (cookie, since), by which a reaper one had forked already is found. Why: a launcher
        stopped (``kill -STOP``, a frozen cgroup) or stuck is waited for up to
        ``DETACH_WAIT_S``, and a run's end (a runtime's close) waited on it so; cut, its
        start ends at once (its reaper, if any, cut off)."""
        marks = []
        for pidfd, (run, cookie, since) in self._launchers.items():
            if run_id is None or run == run_id:
                with contextlib.suppress(ProcessLookupError):  # it has ended already
                    signal.pidfd_send_signal(pidfd, signal.SIGKILL)
                marks.append((cookie, since))
        return marks
