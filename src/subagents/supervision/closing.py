"""Closing: a runtime that goes away ends every live run it holds, in one pass.

Why apart from ``lifecycle``: a cancel walk per run (``Lifecycle.cancel`` -> ``finish``) does
what a runtime that goes on needs: a tree walk, the queue scanned for a run to start into
the freed slot, the deadline disarmed on the timer. When every run ends at once none of that
matters, and closing 100,000 waiting runs as 100,000 walks cost ~100 us of the supervisor's
CPU per run (benchmarks/README.md).
"""

from __future__ import annotations

import msgspec

from subagents.messages import Event, EventKind, Outcome, RunRecord, RunStatus
from subagents.store.writes import AppendEvent, SaveOutcome, SaveRun, Write
from subagents.supervision.effects import Decided, StopAgent
from subagents.supervision.lifecycle import Lifecycle
from subagents.supervision.outcomes import End, end_event, outcome_of
from subagents.supervision.transitions import Move, next_status


def close_all(
    life: Lifecycle,
    reason: str,
    *,
    move: Move = Move.CANCELLED,
    error_kind: str = "cancelled",
) -> tuple[list[str], Decided]:
    """Every live run of ``life`` ends cancelled with ``reason`` (or by ``move``, e.g. failed
    with the store's error once the store works again): the ids, in the order they ended,
    and what their ends come to.

    The same ending as a cancel gives each run: its record, outcome and ``cancelled`` event
    written, its slot released, its unread mail dead, a root's outcome handed to the outside
    once, its agent told to stop. Without: a walk per run (every run ends, so the order is the
    queued runs first, that none starts, then the deepest first); a queued run started into a
    freed slot; an outcome handed to a parent (it ends in the same pass: its agent stops
    without reading it, as in a cancel walk); a deadline disarmed one by one (the timer
    service stops with the runtime; a deadline firing before it does finds the run ended and
    does nothing)."""
    runs, slots, now = life.runs, life.slots, life.now
    queued = [s for r in slots.queued() if (s := runs.live(r)) is not None]
    first = {s.run_id for s in queued}
    rest = [s for s in runs if not s.record.status.terminal and s.run_id not in first]
    rest.sort(key=lambda s: -s.record.depth)  # stable: deepest first, else in order
    order = queued + rest
    ids = [s.run_id for s in order]
    ending = set(ids) - life._ending
    life._ending |= ending  # no outcome is handed to a parent ending in this pass
    end = End(move, error_kind, reason)
    decided = Decided()
    try:
        for state in order:
            record = state.record
            status = next_status(record.run_id, record.status, move)
            runs.ended(state)
            outcome = outcome_of(record, status, end)
            decided.writes.append(runs.fire(state, move, ended_at=now(), outcome=outcome))
            decided.writes.append(SaveOutcome(outcome))
            slots.release(record.run_id)
            kind, data = end_event(record, status, end)
            decided.event(kind, state.record, now(), data)
            decided.add(life.deliver(state, outcome))
            if state.inbox:
                decided.add(life.mail.dead_letters(state, ()))
            life.parking.ended(state)
            decided.effects.append(StopAgent(record.run_id))
    finally:
        life._ending -= ending
    return ids, decided


def failed_unheld(record: RunRecord, reason: str, ts: float) -> list[Write]:
    """The writes that end ``record``, which the store has unfinished but no runtime holds
    in memory (its end was in a transaction that failed), as failed with the store's error
    ``reason``: its record, its outcome, its ``failed`` event."""
    outcome = Outcome(
        run_id=record.run_id,
        status=RunStatus.FAILED,
        error_kind="store",
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
        data={"error_kind": "store", "error": reason, "steps": record.steps},
    )
    return [SaveRun(ended), SaveOutcome(outcome), AppendEvent(event)]
