"""Closing: a runtime that goes away ends every live run it holds, in one pass.

Why apart from ``lifecycle``: a cancel walk per run (``Lifecycle.cancel`` -> ``finish``) does
what a runtime that goes on needs: a tree walk, the queue scanned for a run to start into
the freed slot, the deadline disarmed on the timer. When every run ends at once none of that
matters, and closing 100,000 waiting runs as 100,000 walks cost ~100 us of the supervisor's
CPU per run (benchmarks/README.md). What every run's end leaves behind in the core's state
(its slot, its place in the run table and the tree, its policies) is dropped at once, not run
by run: once every run has ended there is nothing left of any of it to keep.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Collection, Sequence

import msgspec

from subagents.messages import ChildDone, Event, EventKind, Outcome, RunRecord, RunStatus
from subagents.store.writes import (
    AppendEvent,
    DropPreview,
    DropSubscriptions,
    SaveOutcome,
    SaveRun,
    Write,
)
from subagents.supervision.effects import (
    Decided,
    DisarmDeadline,
    Publish,
    StopAgent,
    TellOutside,
    event_of,
)
from subagents.supervision.isolated import each
from subagents.supervision.lifecycle import Lifecycle
from subagents.supervision.outcomes import End, end_event, outcome_of
from subagents.supervision.progress import drop_preview
from subagents.supervision.runs import RunState
from subagents.supervision.transitions import Move, next_status


def close_all(
    life: Lifecycle,
    reason: str,
    *,
    move: Move = Move.CANCELLED,
    error_kind: str = "cancelled",
    goes_on: bool = False,
) -> tuple[list[str], Decided]:
    """Every live run of ``life`` ends cancelled with ``reason`` (or by ``move``, e.g. failed
    with the store's error once the store works again): the ids, in the order they ended,
    and what their ends come to.

    The same ending as a cancel gives each run: its record, outcome and ``cancelled`` event
    written, its slot released, its unread mail dead, a root's outcome handed to the outside
    once, its agent told to stop, its preview (a step under way) dropped, its topic
    subscriptions ended (all at once, in memory and in the store: ``Topics.ended_all``, at a
    cost per subscribed run). Without: a walk per run (every run ends, so the order is the
    queued runs first, that none starts, then the deepest first); a queued run started into a
    freed slot; an outcome handed to a parent (it ends in the same pass: its agent stops
    without reading it, as in a cancel walk); a deadline disarmed one by one (the timer
    service stops with the runtime; a deadline firing before it does finds the run ended and
    does nothing), unless the runtime ``goes_on`` (the store works again: its timers would
    stay armed until each run's deadline, then fire into nothing); a slot released, a run
    forgotten, its policies dropped one by one (all of them at the end:
    ``SlotPool.release_all``, ``RunTable.forget_all``).

    Each run's effects come together, in a cancel's order (its end event, its outcome, its
    agent's stop), not kind by kind: grouped, every stop came after every other effect, so
    no agent's objects were freed while the rest were carried out, and the collector's
    full passes went on until its pacing gave back what it had frozen of 100,000 live runs
    and walked it all (``actors/gc_pacing.py``): a close at 100,000 took twice as long."""
    runs, slots, now = life.runs, life.slots, life.now
    queued = [s for r in slots.queued() if (s := runs.live(r)) is not None]
    first = {s.run_id for s in queued}
    rest = [s for s in runs if not s.record.status.terminal and s.run_id not in first]
    rest.sort(key=_depth, reverse=True)  # stable (reversed too): deepest first, else in order
    order = queued + rest
    ids = [s.run_id for s in order]
    ending = set(ids) - life.ending
    life.ending |= ending  # no outcome is handed to a parent ending in this pass
    end = End(move, error_kind, reason)
    decided = Decided()

    def close_one(state: RunState) -> Decided:
        one = Decided()
        writes, effects = one.writes, one.effects
        record, run_id = state.record, state.run_id
        status = next_status(run_id, record.status, move)
        outcome = outcome_of(record, status, end)
        ts = now()  # (one reading: the record's end and its event's are one moment)
        writes.append(runs.fire_ended(state, status, ts, outcome))
        root = record.parent_run_id is None  # its outcome goes to the outside, below
        writes.append(SaveOutcome(outcome, delivered=root))  # (one write, as ``finish``'s)
        kind, data = end_event(record, status, end)
        event = event_of(kind, state.record, ts, data)
        writes.append(AppendEvent(event))
        effects.append(Publish(event))
        if root:  # to the outside (``Lifecycle.deliver``), recorded delivered above
            done = ChildDone(request_id=state.request_id or run_id, outcome=outcome)
            effects.append(TellOutside(done))
        else:  # (to nobody but a detached child's ancestor: its parent ends too)
            one.add(life.deliver(state, outcome))
        if state.inbox:
            one.add(life.mail.dead_letters(state, ()))
        if state.preview is not None:  # (most runs end between steps)
            writes += drop_preview(state)
        if goes_on:
            effects.append(DisarmDeadline(run_id))
        life.parking.ended(state)
        effects.append(StopAgent(run_id))
        return one

    try:  # a run whose end raises (a bug) ends failed alone (``isolated``)
        each(order, close_one, decided, _by_bug(life), life.mail.ledger)
    finally:
        life.ending -= ending
    decided.add(life.mail.topics.ended_all())
    slots.release_all()
    life.policies.forget(runs.forget_all())
    return ids, decided


_depth = operator.attrgetter("record.depth")
"""A run's depth, read in C (the sort of every live run at a close: no Python call each)."""


def store_recovered(
    life: Lifecycle, reason: str, unheld: Sequence[RunRecord], now: Callable[[], float]
) -> tuple[list[str], Decided]:
    """The store takes writes again after failing with ``reason`` (a full disk freed):
    every run held here (stopped when it failed) ends failed with the store's error, as its
    caller was told, and so does each of ``unheld``, a run the store still has unfinished
    under this runtime that is no longer held (its end was in the transaction that failed).
    The ids ended, and what their ends come to."""
    ended, decided = close_all(life, reason, move=Move.FAILED, error_kind="store", goes_on=True)
    ts = now()
    done = set(ended)
    for record in unheld:
        if record.run_id not in done and life.runs.live(record.run_id) is None:
            decided.writes.extend(failed_unheld(record, reason, ts))
            ended.append(record.run_id)
    return ended, decided


ENDED_ELSEWHERE = "ended by another writer: the store keeps that end"
"""Why the live runs under a run the store keeps ended by another writer are cancelled."""


def ended_elsewhere(life: Lifecycle, run_ids: Collection[str]) -> Decided:
    """Runs of ``run_ids`` held live here that the store keeps ended by another writer (a
    save of theirs, a step or a wait, was refused: ``actors.end_race``): each ended here as
    any end is (its agent stopped, its slot freed, its live children but the detached ones
    cancelled, its unread mail dead letters), cancelled with ``ENDED_ELSEWHERE``; its writer
    keeps the store's end in place of this one (its record, outcome and end event)."""
    tops = [state for r in run_ids if (state := life.runs.live(r)) is not None]
    if not tops:
        return Decided()
    return life.cancel_each(tops, ENDED_ELSEWHERE, [state.run_id for state in tops])[1]


def _by_bug(life: Lifecycle) -> Callable[[RunState, Exception], Decided | None]:
    """What a run whose end raised comes to (``Lifecycle.ended_by_bug``)."""
    return lambda state, exc: life.ended_by_bug(state.run_id, exc)


def failed_unheld(
    record: RunRecord, reason: str, ts: float, *, error_kind: str = "store"
) -> list[Write]:
    """The writes that end ``record``, which the store has unfinished but no runtime holds
    in memory (its end was in a transaction that failed), as failed with the store's error
    ``reason`` (or of ``error_kind``: a bug's, ``actors/told_answers.py``): its record, its
    outcome, its ``failed`` event; its topic subscriptions and its preview, if the store
    has any, dropped (as ``Lifecycle.finish`` drops a held run's)."""
    outcome = Outcome(
        run_id=record.run_id,
        status=RunStatus.FAILED,
        error_kind=error_kind,
        error=reason,
        usage=record.usage,
        steps=record.steps,
    )
    ended = msgspec.structs.replace(record, status=RunStatus.FAILED, ended_at=ts, outcome=outcome)
    event = Event(
        kind=EventKind.FAILED,
        run_id=record.run_id,
        agent=record.agent,
        root_run_id=record.root_run_id,
        parent_run_id=record.parent_run_id,
        depth=record.depth,
        ts=ts,
        data={"error_kind": error_kind, "error": reason, "steps": record.steps},
    )
    run_id = record.run_id
    return [
        SaveRun(ended),
        SaveOutcome(outcome),
        AppendEvent(event),
        DropSubscriptions(run_id),
        DropPreview(run_id),
    ]
