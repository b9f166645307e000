"""Ending orphaned runs where they lie: a stop of runs whose host is gone, without resuming them.

Why: `subagents stop` of a run whose host process died used to post a command that waited
for a `resume`, which first starts the tree again (model calls, tools) only to cancel it. A
person who wants a dead tree ended wants it ended now, and nothing run for it. No runtime
holds these runs, so no ``Lifecycle`` walks them; this decides, as plain data, the writes
that end them as a cancel walk would have: deepest first, each run's record (``cancelled``,
its outcome, its end time), its outcome kept, its ``cancelled`` event with what it spent, its
unread mail made dead letters (one ``dead_letter`` event each).

Who hears of it: a run whose parent ends in the same pass has its outcome marked delivered
(nobody is left to tell, as in a cancel walk). The top run's outcome stays undelivered: if
its parent is itself orphaned, the `resume` that takes the parent up hands it the outcome
(``Recovery``: a live parent gets its children's outcomes through the recovered messages);
a root's waits for whoever attaches. The caller carries the writes out in one store
transaction in which it has checked that the runs are still orphaned (``cli/orphan_stop``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from subagents.messages import Event, EventKind, Mail, MailState, RunRecord
from subagents.store.writes import (
    AppendEvent,
    OutcomeDelivered,
    SaveOutcome,
    SaveRun,
    SetMailsState,
    Write,
)
from subagents.supervision.outcomes import End, end_event, outcome_of
from subagents.supervision.transitions import Move, next_status


def end_orphans(
    records: Sequence[RunRecord],
    *,
    reason: str,
    now: float,
    unread: Mapping[str, Sequence[Mail]],
) -> list[Write]:
    """The writes that end every unfinished run of ``records`` cancelled with ``reason``
    (deepest first), ``unread``: each run's mail that reached it and was not read."""
    ending = [r for r in records if not r.status.terminal]
    ids = {r.run_id for r in ending}
    end = End(Move.CANCELLED, "cancelled", reason)
    writes: list[Write] = []
    for record in sorted(ending, key=lambda r: -r.depth):  # stable: deepest first
        status = next_status(record.run_id, record.status, Move.CANCELLED)
        outcome = outcome_of(record, status, end)
        ended = msgspec.structs.replace(record, status=status, ended_at=now, outcome=outcome)
        writes += [SaveRun(ended), SaveOutcome(outcome)]
        if record.parent_run_id in ids:
            writes.append(OutcomeDelivered(record.run_id))
        kind, data = end_event(record, status, end)
        writes.append(AppendEvent(_event(record, kind, now, data)))
        writes += _dead_letters(record, unread.get(record.run_id, ()), now)
    return writes


def _dead_letters(record: RunRecord, mails: Sequence[Mail], now: float) -> list[Write]:
    left = [m for m in mails if m.state in (MailState.ACCEPTED, MailState.DELIVERED)]
    if not left:
        return []
    writes: list[Write] = [SetMailsState(tuple(m.mail_id for m in left), MailState.DEAD)]
    for mail in left:
        data = {"mail_id": mail.mail_id, "sender": mail.sender}
        writes.append(AppendEvent(_event(record, EventKind.DEAD_LETTER, now, data)))
    return writes


def _event(record: RunRecord, kind: EventKind, now: float, data: Mapping[str, Any]) -> Event:
    return Event(
        kind=kind,
        run_id=record.run_id,
        agent=record.agent,
        root_run_id=record.root_run_id,
        parent_run_id=record.parent_run_id,
        depth=record.depth,
        ts=now,
        data=dict(data),
    )
