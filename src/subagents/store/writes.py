"""Store writes as plain data: what the supervisor's decisions ask the store to keep.

Why data: the decisions (``supervision/``) do no I/O. They return the writes a message causes,
in order, and the supervisor actor carries them out inside one ``store.batch()`` before it
acts on anything that acknowledges them (group commit). As data, a write can be checked in a
test, logged, or shipped to another process that owns the store.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

import msgspec

from subagents.messages import Checkpoint, Event, Mail, MailState, Outcome, RunRecord
from subagents.store.base import RunStore


class SaveRun(msgspec.Struct, frozen=True, gc=False, tag=True):
    record: RunRecord


class AppendEvent(msgspec.Struct, frozen=True, gc=False, tag=True):
    event: Event


class SaveCheckpoint(msgspec.Struct, frozen=True, gc=False, tag=True):
    checkpoint: Checkpoint


class SaveMails(msgspec.Struct, frozen=True, gc=False, tag=True):
    """Several mails (or one), in the order sent."""

    mails: tuple[Mail, ...]


class SetMailsState(msgspec.Struct, frozen=True, gc=False, tag=True):
    """Several mails (or one) moved to ``state``: delivered, read, dead."""

    mail_ids: tuple[str, ...]
    state: MailState


class SaveOutcome(msgspec.Struct, frozen=True, gc=False, tag=True):
    outcome: Outcome


class OutcomeDelivered(msgspec.Struct, frozen=True, gc=False, tag=True):
    """The outcome of ``run_id`` reached its requester (a restore need not hand it again)."""

    run_id: str


class PostCommand(msgspec.Struct, frozen=True, gc=False, tag=True):
    """A command for the runtime (another process) that hosts ``run_id``."""

    kind: Literal["stop", "send"]
    run_id: str
    content: str | None = None


Write = (
    SaveRun
    | AppendEvent
    | SaveCheckpoint
    | SaveMails
    | SetMailsState
    | SaveOutcome
    | OutcomeDelivered
    | PostCommand
)


def apply_writes(store: RunStore, writes: Iterable[Write]) -> None:
    """Carry out ``writes`` in order (the caller holds the batch they belong to)."""
    for write in writes:
        match write:  # the most frequent first: cases are tried in order
            case AppendEvent(event=event):
                store.append_event(event)
            case SaveRun(record=record):
                store.save_run(record)
            case SaveMails(mails=mails):
                store.save_mails(mails)
            case SetMailsState(mail_ids=mail_ids, state=state):
                store.set_mails_state(mail_ids, state)
            case SaveCheckpoint(checkpoint=checkpoint):
                store.save_checkpoint(checkpoint)
            case SaveOutcome(outcome=outcome):
                store.save_outcome(outcome)
            case OutcomeDelivered(run_id=run_id):
                store.mark_outcome_delivered(run_id)
            case PostCommand(kind=kind, run_id=run_id, content=content):
                store.post_command(kind, run_id, content)
