"""Settling: a run's report that it waits or works again (``WaitingChanged``) decided, alone
or a line of them (with journals) together (``SupervisorCore.settled``).

A run that waits lends its slot when a queued run needs it (``parking``), and its record and
a ``waiting`` event say so. Every waiting run's first report comes this way: after a
``spawn_many`` of 1,000 waiting roots, lines of up to a hundred of them (``actors/
settle_line.py``), the largest part of their decisions after admission (31.8k of 123k
instructions per run; benchmarks/README.md, "Session 28 (e-many20)"). So a line is settled
in one pass that does once what is the same for all of its reports: the clock read once for
the line's events (one decision: as a batch's admission reads it once), the events made in
place, the slot marked idle without the part's indirection. A report that parks, or says it
works again, is decided as one alone (``one``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from subagents.messages import Event, EventKind, Journal, RunStatus, WaitingChanged
from subagents.store.writes import AppendEvent
from subagents.supervision.effects import Decided, Publish
from subagents.supervision.lifecycle import Lifecycle
from subagents.supervision.parking import Parking
from subagents.supervision.recorded import Recorded
from subagents.supervision.runs import RunTable
from subagents.supervision.transitions import Move

_WAITING, _RUNNING, _WAITS, _WORKS = RunStatus.WAITING, RunStatus.RUNNING, Move.WAITS, Move.WORKS
_WAITING_EVENT = EventKind.WAITING

Unsettled = tuple[tuple[Journal | WaitingChanged, Exception], ...]
"""The reports of a line whose handling raised (a bug), each with its error."""


class Settling:
    """Decides waiting reports; each call returns what it decided (``effects.Decided``)."""

    def __init__(
        self,
        runs: RunTable,
        now: Callable[[], float],
        parking: Parking,
        lifecycle: Lifecycle,
        recorded: Recorded,
    ) -> None:
        self.runs = runs
        self.now = now
        self.parking = parking
        self.lifecycle = lifecycle
        self.recorded = recorded

    def one(self, msg: WaitingChanged, into: Decided | None = None) -> Decided:
        """A run says it waits (parked at its wait or not) or works again (``into``: the
        line's ``Decided``, added to and returned)."""
        decided = Decided() if into is None else into
        state = self.runs.reporting(msg.run_id, msg.attempt)
        if state is None:  # one parked at its wait (``parked``) is no holder to ask
            return decided
        status = _WAITING if msg.waiting else _RUNNING
        self.parking.waiting(state, msg.waiting and not msg.parked)
        if state.record.status is not status:
            decided.writes.append(self.runs.fire(state, _WAITS if msg.waiting else _WORKS))
            if msg.waiting:
                decided.event(_WAITING_EVENT, state.record, self.now(), {})
        if msg.parked and (lent := self.parking.parked_at_wait(state)) is not None:
            decided.add(lent)  # its slot given back, as a ``Parked`` answer's
            decided.add(self.lifecycle.start_queued())
        return decided

    def all(self, msgs: Sequence[Journal | WaitingChanged]) -> tuple[Unsettled, Decided]:
        """A line of journals and waiting reports, in order, in one decision: those whose
        handling failed (a bug), each with its error, left out alone (the others' kept: one
        run's bug must not drop up to a hundred runs' reports), and what the rest come to."""
        decided = Decided()
        writes, effects = decided.writes, decided.effects
        failed: list[tuple[Journal | WaitingChanged, Exception]] = []
        reporting, fire, set_idle = self.runs.reporting, self.runs.fire, self.parking.slots.set_idle
        ts: float | None = None
        for msg in msgs:
            try:
                if isinstance(msg, Journal):
                    decided.add(self.recorded.journal(msg))
                    continue
                if msg.parked or not msg.waiting:
                    self.one(msg, decided)
                    continue
                state = reporting(msg.run_id, msg.attempt)
                if state is None:
                    continue
                set_idle(state.run_id, True)  # (``Parking.waiting``: the slot lendable)
                if state.record.status is _WAITING:
                    continue
                writes.append(fire(state, _WAITS))
                if ts is None:
                    ts = self.now()  # (read once: the line is one decision)
                record = state.record
                event = Event(  # (``Decided.event`` written out: a call each)
                    kind=_WAITING_EVENT,
                    run_id=record.run_id,
                    agent=record.agent,
                    root_run_id=record.root_run_id,
                    parent_run_id=record.parent_run_id,
                    depth=record.depth,
                    ts=ts,
                    data={},
                )
                writes.append(AppendEvent(event))
                effects.append(Publish(event))
            except Exception as exc:  # a bug: this report alone is left out
                failed.append((msg, exc))
        return tuple(failed), decided
