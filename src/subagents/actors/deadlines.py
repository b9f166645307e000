"""Run deadlines armed on the timer only for runs still live at the next deadline tick.

Why: every run has a deadline (its timeout, 300 s by default), and most runs end long before
it. Arming each on the timer service and cancelling it at the run's end cost the
supervisor's thread two trips through ``TimerService`` per run (a tuple put in line, a
cancel put in line: ~12 calls of a trivial run's ~300), and the timer's thread as many
entries taken in and dropped, for a timer that almost never fires.

So a deadline is first kept here, in a dict by run (``arm``: a store in a dict), and a run's
end takes it out again (``disarm``: one ``dict.pop``). One timer, the tick, is armed
``TICK_S`` after the first deadline kept while none is armed; when it is due the supervisor
is told ``DEADLINES_DUE`` and moves the deadlines kept by then, those of runs still live,
into its line (``due``). A stream of short runs so arms one tick per ``TICK_S``, not a timer
per run.

The line (session 24, e-many13): the deadlines of the runs live past the tick stay here too,
in a dict by run (``_held``) and a heap by deadline (``_line``), with ONE timer on the timer
service, at the earliest (``LINE_KEY``, telling ``DEADLINES_DUE`` as well). Before, each was
put on the timer at the tick (a ``Timeout`` made, a tuple put in the timer's line, taken in,
pushed on its heap) and, at the run's end, cancelled there (another put and take-in): for
100,000 runs waiting at once (``benchmarks/scale.py``), 100,000 of each at the start and
100,000 cancels at the close. Now the tick pushes a tuple per live run on this heap and a
run's end is a ``dict.pop``; an entry of a run that ended stays on the heap until its
deadline comes or the heap is rebuilt (``_compact``: when it holds more than twice the live
ones), and is skipped then. When the line's timer goes off, each deadline due is told to the
supervisor as its ``Timeout`` (from its own thread, handled after what is in its inbox),
and the timer is set again at the earliest left.

While the supervisor keeps up, no run times out later than before: a deadline due before the
armed tick (a short timeout, a deadline already past) is armed on the timer at once, as it
always was; any other is due after the tick and is in the line from the tick on (handled by
the supervisor, as its ``Timeout`` will be). A supervisor behind by more than a deadline's
distance from the tick or the line's timer handles ``DEADLINES_DUE`` late, and that
``Timeout`` is put in its inbox then, behind what came after the deadline, not at the
deadline (a run that completes in between ends completed, not timed out: the review of
e-spawn10). A ``Timeout`` is still checked where it lands against the run's deadline
(``Lifecycle.timeout``): a stale one re-arms or does nothing.

The supervisor's thread alone touches this (its effects are carried out there).
"""

from __future__ import annotations

import heapq
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

LINE_KEY = ("deadline line",)
"""The timer key of the line's earliest deadline (one timer for every run in the line)."""


class DeadlinesDue:
    """Told to the supervisor by the tick: hand the deadlines kept to the timer."""

    __slots__ = ()


DEADLINES_DUE = DeadlinesDue()


class Deadlines:
    """The deadlines of the live runs: kept until the tick, then held in the line, with
    one tick and one timer for the line's earliest armed for them all."""

    __slots__ = ("_held", "_kept", "_line", "_line_at", "_supervisor", "_tick_at", "_timer")

    def __init__(self, timer: TimerService, supervisor: pykka.ActorRef[Any]) -> None:
        self._timer = timer
        self._supervisor = supervisor
        self._kept: dict[str, float] = {}
        """Run id -> its deadline (``time.monotonic()`` seconds), not in the line yet."""
        self._tick_at = -math.inf
        """When the armed tick is due (-inf: none armed)."""
        self._held: dict[str, float] = {}
        """Run id -> its deadline, in the line (the truth: ``_line`` may hold stale ones)."""
        self._line: list[tuple[float, str]] = []
        """A heap of (deadline, run id): every held one, and some no longer held."""
        self._line_at = math.inf
        """When the line's timer goes off (inf: not set)."""

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
        self._kept.pop(effect.run_id, None)  # (a restart's earlier deadline, kept or held)
        self._held.pop(effect.run_id, None)
        self._put(effect.run_id, deadline)

    def disarm(self, effect: DisarmDeadline) -> None:
        """The run's deadline forgotten: taken out here, else cancelled on the timer."""
        run_id = effect.run_id  # (both popped: a restart's earlier one may be held)
        kept = self._kept.pop(run_id, None)
        if self._held.pop(run_id, None) is None and kept is None:
            self._timer.cancel(("deadline", run_id))

    def due(self) -> None:
        """The tick or the line's timer: every deadline kept goes to the line, each due
        deadline of the line is told, and the line's timer is set at the earliest left."""
        now = time.monotonic()
        if self._tick_at <= now:  # (-inf: no tick armed; else due, or the line's timer)
            self._tick_at = -math.inf
            kept, self._kept = self._kept, {}
            if kept:
                self._hold(kept)
        line, held = self._line, self._held
        while line and line[0][0] <= now:
            deadline, run_id = heapq.heappop(line)
            if held.get(run_id) == deadline:
                del held[run_id]
                self._supervisor.tell(Timeout(run_id=run_id))
        while line and held.get(line[0][1]) != line[0][0]:  # (ended: skipped)
            heapq.heappop(line)
        if self._line_at <= now:  # its timer went off (this is its telling): set again
            self._line_at = math.inf
        self._set_line()

    def _hold(self, kept: dict[str, float]) -> None:
        """``kept`` into the line (a restart's earlier deadline held is replaced)."""
        held, line, push = self._held, self._line, heapq.heappush
        held.update(kept)
        for run_id, deadline in kept.items():
            push(line, (deadline, run_id))
        if len(line) > 64 and len(line) > 2 * len(held):
            self._compact()

    def _compact(self) -> None:
        """The line rebuilt from what is held: the entries of ended runs dropped."""
        self._line = [(deadline, run_id) for run_id, deadline in self._held.items()]
        heapq.heapify(self._line)

    def _set_line(self) -> None:
        if self._line and self._line[0][0] < self._line_at:
            self._line_at = self._line[0][0]
            self._timer.tell_at(LINE_KEY, self._line_at, self._supervisor, DEADLINES_DUE)

    def clear(self) -> None:
        """Every run stopped at once (``Effector.stop_all``): nothing kept times out."""
        self._kept.clear()
        self._held.clear()
        self._line.clear()

    def _put(self, run_id: str, deadline: float) -> None:
        self._timer.tell_at(
            ("deadline", run_id), deadline, self._supervisor, Timeout(run_id=run_id)
        )

    @property
    def kept(self) -> int:
        """Deadlines kept here, not in the line yet (for tests)."""
        return len(self._kept)

    @property
    def held(self) -> int:
        """Deadlines in the line (for tests)."""
        return len(self._held)

    @property
    def line_entries(self) -> int:
        """Entries on the line's heap, those of ended runs not yet dropped included (for
        tests)."""
        return len(self._line)
