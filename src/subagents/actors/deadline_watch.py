"""DeadlineWatch: the live runs' deadlines, and one timer for the earliest of them.

Why: every run has a deadline, armed when it starts and disarmed when it ends, and most runs
end long before theirs. With a timer per run, each start put an entry in the timer
service's heap (under its lock, with the message it would tell) and each end took it out
again: two locked operations on the timer's table per run, on the supervisor's thread.
Here a start is a push on a heap the supervisor's thread alone touches, an end a dict
``pop``, and the timer service holds one entry, ``DEADLINES_DUE`` at the earliest deadline
(set again only when a start's deadline comes before it). When it is told, the supervisor
asks ``due`` for the runs whose deadline has passed and has each decided as its own
``Timeout`` was (the core checks it against the run's deadline, as before).

An ended run's entry stays in the heap until it comes to the top or the heap is rebuilt
(when the ended outnumber the live, as ``TimerService.cancel`` does), so a long-lived
runtime's heap stays about the size of its live runs.
"""

from __future__ import annotations

import heapq
import time
from typing import Any

import pykka

from subagents.actors.timer import TimerService


class DeadlinesDue:
    """Told to the supervisor at the earliest deadline armed: ask ``DeadlineWatch.due``."""

    __slots__ = ()


DEADLINES_DUE = DeadlinesDue()


class DeadlineWatch:
    """The deadline of each live run (on the monotonic clock), and the one timer armed for
    the earliest. Used on the supervisor's thread only (the Effector's)."""

    __slots__ = ("_armed", "_deadline", "_heap", "_key", "_ref", "_timer")

    def __init__(self, timer: TimerService, ref: pykka.ActorRef[Any]) -> None:
        self._timer = timer
        self._ref = ref
        self._key = ("deadline watch", id(self))
        """Its timer's key: a tuple, so the timer service counts these apart."""
        self._deadline: dict[str, float] = {}
        self._heap: list[tuple[float, str]] = []
        self._armed: float | None = None
        """The deadline the timer is set for now (None: none is)."""

    def arm(self, run_id: str, deadline: float) -> None:
        """``run_id``'s deadline is ``deadline`` (a later arming of it replaces this one)."""
        self._deadline[run_id] = deadline
        heapq.heappush(self._heap, (deadline, run_id))
        if self._armed is None or deadline < self._armed:
            self._set(deadline)

    def disarm(self, run_id: str) -> None:
        """``run_id`` ended: its deadline is forgotten (its heap entry left to drop)."""
        deadline = self._deadline
        deadline.pop(run_id, None)
        heap = self._heap
        if len(heap) > 64 and len(heap) > 2 * len(deadline):
            self._heap = [(d, r) for r, d in deadline.items()]
            heapq.heapify(self._heap)

    def due(self, now: float | None = None) -> list[str]:
        """The runs whose deadline has passed at ``now`` (default: the monotonic clock's),
        forgotten here; the timer set for the next deadline, if any is left."""
        now = time.monotonic() if now is None else now
        heap, deadlines = self._heap, self._deadline
        out: list[str] = []
        while heap and heap[0][0] <= now:
            deadline, run_id = heapq.heappop(heap)
            if deadlines.get(run_id) == deadline:  # else ended, or armed again since
                del deadlines[run_id]
                out.append(run_id)
        while heap and deadlines.get(heap[0][1]) != heap[0][0]:
            heapq.heappop(heap)  # ended: the timer is not set for it
        self._armed = None
        if heap:
            self._set(heap[0][0])
        return out

    def pending(self) -> int:
        """The runs whose deadline is watched (for tests)."""
        return len(self._deadline)

    def _set(self, deadline: float) -> None:
        self._armed = deadline
        self._timer.tell_at(self._key, deadline, self._ref, DEADLINES_DUE)
