"""StepTail: the rest of a run's step, once its spawns only queue, decided a little later.

Why: a step that spawns 1,000 children under a limit of 100 is decided in decisions of up to
``STEP_SPAWNS_MOST`` spawns (``actors.spawn_group``). The first starts 100 children; each of
the nine after it only queues (~1.2 ms of the supervisor's CPU each, session 26). Decided back
to back, those nine ran while the 100 children just started were starting their threads and
their first model calls: the first wave is CPU-bound (one GIL), so ~11 ms of admissions that
start nothing were paid inside it, before the 100th call began (``benchmarks/fanout.py``,
``first_wave_ms``). Nothing those queued runs do can happen before a slot frees, and a slot
frees only by a message the supervisor handles (a run's end, a park, a stop).

So once a step's decision leaves runs queued, the rest of that step's ``Batch`` (its next
spawns and whatever followed them) is held here and decided before the next message the
supervisor handles, whatever it is (an ask, a run's end, a spawn of another run, a command
poll, the close: ``actors.alone.receive``, ``SupervisorActor.on_stop``; a report of the line
handed after it: ``SupervisorActor._receive_batch``/``_receive`` look at ``_held`` first, an
attribute read, no call more per report when nothing is held; a message handled after the
line's reports: ``SupervisorActor.on_receive``), or when ``TAIL_S`` has passed (the timer's
``TAIL_DUE``), whichever comes first. The deadline tick alone does not take it (it only moves
deadlines of live runs into a line; a held run has none yet): every 100 ms, it fell inside
the first wave. In order: the held messages are decided exactly as they would have been,
only later, and nothing told after them is decided before them, so the
queue's order (FIFO across every requester) holds, and every ask (``status``, a stop, the
close's) sees them decided. Not held: a rest while reports wait in the line (``hold``), and a
rest with a spawn that could start now (``supervision.queued_behind``).

Which rest only queues: each of its spawns has the slot key of a run queued now (made as its
admission would: the definition found now, so one reloaded with another tier since those
runs queued has another key), and a spawn whose key is queued never starts before
the runs queued with it (``SlotPool.try_take``: if its key fits, theirs does, and they go
first). A rest with a spawn of an agent (or a parent) that no queued run has, whose slots
may be free, is decided at once, as before the tail existed: such a child starts now, not up
to ``TAIL_S`` later (session 27 held it too, while anything was queued).

What moves is when the held spawns' records and ``spawned``/``queued`` events come into
being and when the parent hears their replies: up to ``TAIL_S`` later, or at the next
message. A listing read from the store meanwhile (``Runtime.runs``, ``ps``) sees the step's
first decisions only, as it could between two of them before. A crash in that window loses
what a crash between two of the step's decisions already lost (each decision is its own
transaction): a state a crash could leave before.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sized
from typing import Any

import pykka

from subagents.actors.timer import TimerService
from subagents.supervision.queued_behind import only_queue

TAIL_S = 0.03
"""How long a step's held tail waits at most for the next message (the first wave's
children begin their calls meanwhile; 50 ms calls in ``fanout.py``)."""


class TailDue:
    """Told to the supervisor by the timer: decide the held tail now."""

    __slots__ = ()


TAIL_DUE = TailDue()


class StepTail:
    """The rest of one step's ``Batch`` held back (at most one at a time)."""

    __slots__ = (
        "_core",
        "_decide",
        "_held",
        "_key",
        "_line",
        "_queue",
        "_ref",
        "_timer",
        "delay",
    )

    def __init__(self, supervisor: Any, timer: TimerService, delay: float | None = None) -> None:
        """``supervisor``: the ``SupervisorActor`` whose steps these are: its handling of a
        Batch's messages (``_receive_batch``), the runs waiting for a slot (its core's
        ``SlotPool.waiting[1]`` and ``queued_keys``, read only), its line of reports
        (``LateReports``)."""
        self._timer = timer
        self._ref: pykka.ActorRef[Any] = supervisor.actor_ref
        self._decide: Callable[..., None] = supervisor._receive_batch
        self._queue: Sized = supervisor.core.slots.waiting[1]
        self._core: Any = supervisor.core  # (its queue read: ``queued_behind.only_queue``)
        self._line: Sized = supervisor.late._reports
        self._held: tuple[Any, ...] | None = None
        """The held rest; ``()`` while it is being decided; None: nothing held."""
        self._key = ("step tail", id(self))
        self.delay = TAIL_S if delay is None else delay
        """(0: nothing held, every step decided at once, as before)"""

    def hold(self, rest: tuple[Any, ...]) -> bool:
        """After a decision of a step's spawns: hold ``rest`` (what is left of its Batch) if
        runs are queued now and each spawn in it would only queue behind them
        (``supervision.queued_behind``), unless a tail is held or being taken already,
        nothing is left, or reports wait in the line (put after this step: decided next, in
        the same wake-up, they would pass it). Whether held."""
        if not self._queue or self._held is not None or not rest or self._line or self.delay <= 0:
            return False
        if not only_queue(self._core, rest):
            return False
        self._held = rest
        self._timer.tell_at(self._key, time.monotonic() + self.delay, self._ref, TAIL_DUE)
        return True

    def take(self) -> None:
        """Decide the held tail now (before the message about to be handled), if any."""
        held = self._held
        if not held:
            return
        self._held = ()  # being taken: what it decides is not held again (``hold``)
        self._timer.cancel(self._key)
        try:
            self._decide(held)
        finally:
            self._held = None
