"""Wakes: the timers one run's agent actor asked for (``AgentPort.wake_after``).

A wake asked for during a handling is armed when that handling ends, not at once: one asked
for and cancelled within the same handling (a ``receive`` answered by the next mail of the
same ``Batch``) never reaches the timer service. When the run ends, its timer is cancelled.

A run has ONE timer in the timer service, at (or before) its earliest armed wake, not one per
wake: a ``receive`` that waits and is answered by mail before its timeout, over and over (a
mail stream, a ping-pong), would otherwise put a timer in and take it out again for every
mail (two entries in the timer service's line, a heap entry, a ``Wake`` made, per mail).
Cancelling a wake only forgets it here; arming one whose deadline is not before the timer's changes
nothing there. So the timer may go off early, for a wake since cancelled: the actor is told
``WAKES_DUE``, hands the behaviour a ``Wake`` for each wake due by then (none, when it went
off early) and sets the timer again at the earliest of the rest. A run waiting for mail with
a timeout of T so costs the timer service one timer per T at most, however much mail comes.

Apart from the actor because it is its own small state machine, and made only when a run
first asks for a wake: most short runs never do, and a waiting run costs its objects.

A wake asked for the run's whole timeout (``RunRecord.deadline_s``) ahead or more is not
wanted at all (``AgentActor.wake_after``, session 24): it cannot go off before the run's
deadline, at which the run times out (the supervisor's ``Timeout``, ``Lifecycle.timeout``) and
its actor stops. A run's deadline is set at each start to at most that start's clock plus
``deadline_s`` (a restart's afresh, a moved run's kept: ``Starts.start``), and its actor is
made after it, so ``now + seconds`` is at or past it. Compared by length, not by time: an
agent on another host reads another monotonic clock. What it saves a waiting run
(``benchmarks/scale.py``'s 100,000: ``receive(timeout=3000)`` under a 3,000 s timeout): its
``Wakes`` (two dicts, a key), its timer put in and cancelled at its end (the timer thread's
line and heap), the handling's arming (benchmarks/README.md, "Session 24 (e-many13)").
"""

from __future__ import annotations

import itertools
import time
from typing import Any, Final

import pykka

from subagents.actors.timer import TimerService
from subagents.messages import Wake


class _WakesDue:
    """The message of a run's timer (never sent anywhere but to its own actor)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "WAKES_DUE"


WAKES_DUE: Final = _WakesDue()
"""What a run's timer tells its actor: see which of its wakes are due (``Wakes.due``)."""

_ATTEMPTS = itertools.count()
"""Tells apart the ``Wakes`` of a run's attempts (one per agent actor)."""


class Wakes:
    """The wakes of one run: those wanted in the current handling, those armed, its timer."""

    __slots__ = ("armed", "key", "set_at", "timer", "wanted")

    def __init__(self, timer: TimerService, run_id: str) -> None:
        self.timer = timer
        self.key = ("wakes", run_id, next(_ATTEMPTS))
        """The run's one timer in the timer service, this attempt's own: an earlier attempt
        (a restart), whose actor cancels its timer only as it stops, after its end was
        reported, may do so after this one armed its own, and must not take it."""
        self.wanted: dict[str, float] = {}
        """Asked for in this handling, armed when it ends (key -> monotonic deadline)."""
        self.armed: dict[str, float] = {}
        """Armed and neither due nor cancelled yet (key -> monotonic deadline)."""
        self.set_at: float | None = None
        """When the timer goes off (at or before every armed deadline); None: not set, or
        gone off and its ``WAKES_DUE`` not handled yet (which sets it again if need be)."""

    def want(self, key: str, seconds: float) -> None:
        """Wake the run with ``Wake(key)`` in ``seconds``, once this handling ends."""
        self.wanted[key] = time.monotonic() + seconds

    def cancel(self, key: str) -> None:
        """No ``Wake(key)``: forgotten here (the timer, if it goes off for it, finds nothing),
        whether wanted in this handling, armed before, or both (asked for again)."""
        if self.wanted:  # (most: asked for in an earlier handling, armed since)
            self.wanted.pop(key, None)
        self.armed.pop(key, None)

    def arm(self, ref: pykka.ActorRef[Any], *, ended: bool) -> None:
        """The handling is over: arm what it asked for (nothing, if the run has ended)."""
        wanted = self.wanted  # (emptied, not replaced: no dict made per handling)
        if ended or not wanted:
            wanted.clear()
            return
        if len(wanted) == 1:  # (most handlings: one receive waits; one C call)
            key, earliest = wanted.popitem()
            self.armed[key] = earliest
        else:
            self.armed.update(wanted)
            earliest = min(wanted.values())
            wanted.clear()
        set_at = self.set_at
        if set_at is None or earliest < set_at:  # (checked here: most arms change nothing)
            self._set(ref, earliest)

    def due(self, ref: pykka.ActorRef[Any]) -> list[Wake]:
        """The timer went off (``WAKES_DUE``): the wakes due now, forgotten, and the timer
        set again at the earliest of the rest."""
        self.set_at = None
        now = time.monotonic()
        keys = [key for key, deadline in self.armed.items() if deadline <= now]
        for key in keys:
            del self.armed[key]
        if self.armed:
            self._set(ref, min(self.armed.values()))
        return [Wake(key=key) for key in keys]

    def _set(self, ref: pykka.ActorRef[Any], earliest: float) -> None:
        if self.set_at is None or earliest < self.set_at:
            self.set_at = earliest
            self.timer.tell_at(self.key, earliest, ref, WAKES_DUE)

    def cancel_all(self) -> None:
        """The run is over: its timer does not go off any more."""
        self.armed.clear()
        self.timer.cancel(self.key)
