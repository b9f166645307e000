"""A recovery's decision owed to the store, written again only for what the store lacks.

Why: ``actors.outage`` keeps a recovery it decided but could not write (``Outage._owed``) and
writes it again at the next try. A write that failed in a known way (SQLite's rollback) left
nothing; one of unknown fate (``UnsureWrite``: the cluster's head, or a PostgreSQL
connection, lost before it answered) may have been committed all the same, and writing it
again then gives each run it ended a second end (a second ``failed`` event, its outcome and
record saved over). So before writing it again, the runs it ends are read: those the store
keeps ended are left out of the writes (their end, whoever recorded it, stands); the
decision's reply and effects stay (its runs' callers are told, its agents stopped, once),
but for the events it publishes of a run left out whose end the store keeps is another
writer's: that end is published in place of the recovery's ``failed`` (live subscribers are
shown what the store keeps). A run whose kept end is the recovery's own (its write was
committed) keeps its events as decided: they are what the store keeps, and no events are
read (a committed recovery of 100,000 runs read each one's events, one read a run).

Only the runs the store does not list unfinished are read: none when the write left nothing
but runs the store never had, all of them when it was committed; a slice of them at a time
(``READ_SLICE``, one statement each: ``get_runs``), not one read each (a cluster's recovery
of 100,000 runs read them one call to the head at a time: up to a minute).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from subagents.messages import Event, EventKind, RunRecord, RunStatus
from subagents.store.base import READ_SLICE, RunStore
from subagents.store.writes import (
    AppendEvent,
    DropPreview,
    DropSubscriptions,
    OutcomeDelivered,
    SaveOutcome,
    SaveRun,
    Write,
)
from subagents.supervision.effects import Decision, Effect, Publish

_RUN_OF: dict[type[Any], Callable[[Any], str]] = {
    SaveRun: lambda w: w.record.run_id,
    SaveOutcome: lambda w: w.outcome.run_id,
    AppendEvent: lambda w: w.event.run_id,
    OutcomeDelivered: lambda w: w.run_id,
    DropSubscriptions: lambda w: w.run_id,
    DropPreview: lambda w: w.run_id,
}
"""The run each kind of write a recovery makes for one run's end is about (``closing``:
``close_all``, ``failed_unheld``); a write of another kind (mail set dead) is kept: written
twice, it leaves what it left once."""


def still_owed(decision: Decision, store: RunStore, unfinished: Collection[str]) -> Decision:
    """``decision`` (a recovery: its reply the ids it ends) without the writes about the runs
    the store keeps ended; ``unfinished``: the ids the store lists unfinished now (read
    before, so not read again). The same decision when the store keeps none of them ended."""
    ended = [run_id for run_id in decision.reply if run_id not in unfinished]
    kept: dict[str, RunRecord] = {}
    for at in range(0, len(ended), READ_SLICE):
        records = store.get_runs(ended[at : at + READ_SLICE])
        kept.update((run_id, r) for run_id, r in records.items() if r.status.terminal)
    if not kept:
        return decision
    writes: list[Write] = [w for w in decision.writes if about(w) not in kept]
    shown = {
        e.event.run_id
        for e in decision.effects
        if isinstance(e, Publish)
        and (record := kept.get(e.event.run_id)) is not None
        and not _is_kept_end(e.event, record)
    }
    if not shown:
        return Decision(decision.reply, writes, decision.effects)
    effects: list[Effect] = [
        e for e in decision.effects if not (isinstance(e, Publish) and e.event.run_id in shown)
    ]
    effects += (Publish(end) for end in _kept_ends(store, shown))
    return Decision(decision.reply, writes, effects)


def _is_kept_end(event: Event, kept: RunRecord) -> bool:
    """Whether ``event`` is the end the store keeps in ``kept`` (its kind the status, its
    time the end time: an end's record and event are one moment, ``closing.close_all``):
    the recovery's own, committed, or one published in place of it at an earlier try."""
    return event.kind.value == kept.status.value and event.ts == kept.ended_at


def _kept_ends(store: RunStore, run_ids: Collection[str]) -> list[Event]:
    """The end event the store keeps of each of ``run_ids`` (kept ended): what live
    subscribers are shown in place of the recovery's ``failed``, which the store refused
    (another writer's end, or a late ``COMMIT``, whose own publishing, if any, was in
    another process or lost with the decision that failed). A few runs, on a rare path
    (another writer's end: not the recovery's own committed): each one's events read (none
    kept: nothing published)."""
    ends: list[Event] = []
    for run_id in run_ids:
        last = [e for e in store.events(run_id) if e.kind in END_KINDS]
        ends += last[-1:]
    return ends


END_KINDS = frozenset(EventKind(status.value) for status in RunStatus if status.terminal)
"""The kinds of a run's end event (one per end: ``store.base.AlreadyEnded``)."""


def about(write: Write) -> str | None:
    """The run ``write`` is about, of the kinds a run's end writes (``_RUN_OF``); None for
    another kind (kept: written twice, it leaves what it left once)."""
    run_of = _RUN_OF.get(type(write))
    return None if run_of is None else run_of(write)
