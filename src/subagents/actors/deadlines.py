"""Run deadlines armed on the timer only for runs still live at the next deadline tick.

Why: every run has a deadline (its timeout, 300 s by default), and most runs end long before
it. Arming each on the timer service and cancelling it at the run's end cost the
supervisor's thread two trips through ``TimerService`` per run (a tuple put in line, a
cancel put in line: ~12 calls of a trivial run's ~300), and the timer's thread as many
entries taken in and dropped, for a timer that almost never fires.

So a deadline is first kept here, in a dict by run (``arm``: a store in a dict), and a run's
end takes it out again (``disarm``: one ``dict.pop``). One timer, the tick, is armed
``TICK_S`` after the first deadline kept while none is armed; when it is due the supervisor
is told ``DEADLINES_DUE`` and hands the deadlines kept by then, those of runs still live,
to the timer as before (``due``). A stream of short runs so arms one tick per ``TICK_S``,
not a timer per run.

While the supervisor keeps up, no run times out later than before: a deadline due before the
armed tick (a short timeout, a deadline already past) is armed on the timer at once, as it
always was; any other is due after the tick and is on the timer from the tick on (handled by
the supervisor, as its ``Timeout`` will be). A supervisor behind by more than a deadline's
distance from the tick handles ``DEADLINES_DUE`` late, and that ``Timeout`` is put in its
inbox then, behind what came after the deadline, not at the deadline (a run that completes
in between ends completed, not timed out: the review of e-spawn10). A ``Timeout`` is still
checked where it lands against the run's deadline (``Lifecycle.timeout``): a stale one
re-arms or does nothing.

The supervisor's thread alone touches this (its effects are carried out there).
"""

from __future__ import annotations

import math
import time
from typing import Any

import pykka

from subagents.actors.timer import TimerService
from subagents.messages import Timeout
from subagents.supervision.effects import ArmDeadline, DisarmDeadline

TICK_S = 0.1
"""How long a deadline may wait here before it is handed to the timer, at most (a deadline
due before the tick is armed at once): one supervisor message per ``TICK_S`` at most while
runs start, none when none do."""

TICK_KEY = ("deadline tick",)
"""The tick's timer key (a kind of its own: tests count the timers a path arms by kind)."""


class DeadlinesDue:
    """Told to the supervisor by the tick: hand the deadlines kept to the timer."""

    __slots__ = ()


DEADLINES_DUE = DeadlinesDue()


class Deadlines:
    """The deadlines of the live runs not yet on the timer, and the one tick armed for them."""

    __slots__ = ("_kept", "_supervisor", "_tick_at", "_timer")

    def __init__(self, timer: TimerService, supervisor: pykka.ActorRef[Any]) -> None:
        self._timer = timer
        self._supervisor = supervisor
        self._kept: dict[str, float] = {}
        """Run id -> its deadline (``time.monotonic()`` seconds), not on the timer yet."""
        self._tick_at = -math.inf
        """When the armed tick is due (-inf: none armed)."""

    def arm(self, effect: ArmDeadline) -> None:
        """``effect``'s deadline kept until the tick, or armed at once if due before it."""
        deadline = effect.deadline
        if deadline >= self._tick_at:
            if self._tick_at == -math.inf:  # none armed: the first deadline kept arms it
                self._tick_at = time.monotonic() + TICK_S
                self._timer.tell_at(TICK_KEY, self._tick_at, self._supervisor, DEADLINES_DUE)
            if deadline >= self._tick_at:  # (else: due before the tick just armed)
                self._kept[effect.run_id] = deadline
                return
        self._kept.pop(effect.run_id, None)  # (a restart's earlier deadline, kept)
        self._put(effect.run_id, deadline)

    def disarm(self, effect: DisarmDeadline) -> None:
        """The run's deadline forgotten: taken out here, else cancelled on the timer."""
        if self._kept.pop(effect.run_id, None) is None:
            self._timer.cancel(("deadline", effect.run_id))

    def due(self) -> None:
        """The tick: every deadline kept goes to the timer (a past one fires at once)."""
        self._tick_at = -math.inf
        kept, self._kept = self._kept, {}
        for run_id, deadline in kept.items():
            self._put(run_id, deadline)

    def clear(self) -> None:
        """Every run stopped at once (``Effector.stop_all``): nothing kept times out."""
        self._kept.clear()

    def _put(self, run_id: str, deadline: float) -> None:
        self._timer.tell_at(
            ("deadline", run_id), deadline, self._supervisor, Timeout(run_id=run_id)
        )

    @property
    def kept(self) -> int:
        """Deadlines kept here, not on the timer yet (for tests)."""
        return len(self._kept)
