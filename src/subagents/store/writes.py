"""Store writes as plain data: what the supervisor's decisions ask the store to keep.

Why data: the decisions (``supervision/``) do no I/O. They return the writes a message causes,
in order, and the supervisor actor carries them out inside one ``store.batch()`` before it
acts on anything that acknowledges them (group commit). As data, a write can be checked in a
test, logged, or shipped to another process that owns the store.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import msgspec

from subagents.messages import (
    ApprovalRecord,
    Checkpoint,
    CheckpointDelta,
    CommandKind,
    Event,
    JournalEntry,
    Mail,
    MailState,
    Outcome,
    Preview,
    RunRecord,
    RunStatus,
    Subscription,
)
from subagents.store.base import RunStore


class SaveRun(msgspec.Struct, frozen=True, gc=False, tag=True):
    record: RunRecord


class AppendEvent(msgspec.Struct, frozen=True, gc=False, tag=True):
    event: Event
    checked: bool = False
    """The event surely encodes and reads back, known from what was checked before it was
    made, so a store may hold it without checking it field by field: a straight mail's two
    events (``supervision/mailing.announce_one``), whose run fields come from their runs'
    records (each checked to read back when it was saved) and whose data are the mail's id
    and its sender's and recipient's run ids (checked by its sender's record of the mail,
    ``sqlite_mail.mail_row``); its time alone is looked at (``held_checked``). Why: that
    check was ~12k of a durable mail's instructions on the supervisor
    (``benchmarks/README.md``, session 32). Should the trust ever break, the SQLite store
    finds it when it sends the batch and keeps the rest of the batch:
    ``sqlite_event_groups.statements_kept`` repairs or refuses that one event."""


class SaveCheckpoint(msgspec.Struct, frozen=True, gc=False, tag=True):
    checkpoint: Checkpoint


class AddToCheckpoint(msgspec.Struct, frozen=True, gc=False, tag=True):
    """One tool call's change to its run's checkpoint (``CheckpointDelta``): a small row,
    not the whole checkpoint again."""

    delta: CheckpointDelta


class SaveMails(msgspec.Struct, frozen=True, gc=False, tag=True):
    """Several mails (or one), in the order sent."""

    mails: tuple[Mail, ...]


class SetMailsState(msgspec.Struct, frozen=True, gc=False, tag=True):
    """Several mails (or one) moved to ``state``: delivered, read, dead."""

    mail_ids: tuple[str, ...]
    state: MailState


class SaveOutcome(msgspec.Struct, frozen=True, gc=False, tag=True):
    """Keep how a run ended; ``delivered``: handed to its requester by the same decision
    (``Lifecycle.finish``: the one statement an ``OutcomeDelivered`` after it would change)."""

    outcome: Outcome
    delivered: bool = False


class OutcomeDelivered(msgspec.Struct, frozen=True, gc=False, tag=True):
    """The outcome of ``run_id`` reached its requester (a restore need not hand it again)."""

    run_id: str


class PostCommand(msgspec.Struct, frozen=True, gc=False, tag=True):
    """A command for the runtime (another process) that hosts ``run_id``."""

    kind: CommandKind
    run_id: str
    content: str | None = None


class SaveJournal(msgspec.Struct, frozen=True, gc=False, tag=True):
    """Entries appended to a function agent's journal (what its replay after a crash
    follows)."""

    run_id: str
    entries: tuple[JournalEntry, ...]
    read_mail: tuple[str, ...] = ()
    """The mail those entries say the run read, marked read with them (a sender's record
    carries them so: ``supervision/unsaved_journal.py``; the supervisor writes its
    receipts apart, ``SetMailsState``)."""


class AttemptFence(msgspec.Struct, frozen=True, gc=False):
    """Which start of its run a sender's record of mail comes from, as the store tells starts
    apart: the run's restart and retry counts when it started (``RunRecord``). A restart or a
    retry of the run is committed with a new count, an end with a terminal status, before
    the supervisor acts on either; so a record whose run the store no longer keeps live
    with these counts (checked in the record's transaction: ``FencedStore.record_mails``)
    comes from a start that is over (a stalled thread, a call that came back after its run
    timed out, was stopped or retried) and must not commit. A start moved off a lost node
    keeps its counts: ``cluster.record_fence`` refuses its records."""

    run_id: str
    restarts: int = 0
    retries: int = 0

    @classmethod
    def of(cls, record: RunRecord) -> AttemptFence:
        """The start ``record`` (as its agent was handed it) is of."""
        return cls(record.run_id, record.restarts, record.retries)

    def refusal(self, stored: RunRecord | None) -> str | None:
        """Why a record of this start must not commit, ``stored`` being its run's record as
        the store keeps it in the record's transaction; None when it may."""
        if stored is None:
            return self.refusal_of(None)
        return self.refusal_of((stored.status, stored.restarts, stored.retries))

    def refusal_of(self, stored: tuple[RunStatus, int, int] | None) -> str | None:
        """``refusal`` from what it reads of the run's record: its status, restarts and
        retries (a store that keeps them in columns reads them alone: ``SQLiteStore``)."""
        run = f"run {self.run_id}"
        if stored is None:
            return f"{run} is not in the store: a record of its mail is refused"
        status, restarts, retries = stored
        if status.terminal:
            return f"{run} ended ({status.value}): a record of its mail is refused"
        if restarts != self.restarts or retries != self.retries:
            return (
                f"{run} was restarted or retried since the start that sent this mail"
                f" (restarts {self.restarts} -> {restarts}, retries {self.retries}"
                f" -> {retries}): a record of its mail is refused"
            )
        return None


RecordMail = Callable[
    [Sequence[Mail], SaveJournal | None, Callable[[], None], AttemptFence | None], None
]
"""A node's sender's record of mails written by the driver (``FencedStore.record_mails``):
the mails, the journal entries that go with them, a check run in their transaction
(``cluster.record_fence``: the sender's node was not declared lost), and the sender's start
(``AttemptFence``: it is still its run's)."""


class ReleaseLease(msgspec.Struct, frozen=True, gc=False, tag=True):
    """The lease of ``owner``, whose orphaned runs were just taken over, is deleted: a host
    that was only stalled learns at its next renewal that it lost them."""

    owner: str


class SaveApproval(msgspec.Struct, frozen=True, gc=False, tag=True):
    """A run's ask kept as a pending approval (one kept already stays: ``save_approval``)."""

    approval: ApprovalRecord


class SaveSubscription(msgspec.Struct, frozen=True, gc=False, tag=True):
    """A run subscribed to a topic of its tree (``supervision/topics.py``)."""

    subscription: Subscription


class DropSubscriptions(msgspec.Struct, frozen=True, gc=False, tag=True):
    """A run unsubscribed from ``topics`` (None: it ended, from all of them)."""

    run_id: str
    topics: tuple[str, ...] | None = None


class SavePreview(msgspec.Struct, frozen=True, gc=False, tag=True):
    """A run's ``Preview`` (what its model has streamed of the step under way), replacing
    the one kept: scratch for viewers in other processes, not the run's history."""

    preview: Preview


class DropPreview(msgspec.Struct, frozen=True, gc=False, tag=True):
    """The run's step was recorded (or it ended): its preview is gone."""

    run_id: str


Write = (
    SaveRun
    | AppendEvent
    | SaveCheckpoint
    | AddToCheckpoint
    | SaveMails
    | SetMailsState
    | SaveOutcome
    | OutcomeDelivered
    | PostCommand
    | SaveJournal
    | ReleaseLease
    | SaveApproval
    | SaveSubscription
    | DropSubscriptions
    | SavePreview
    | DropPreview
)


def _save_run(store: RunStore, write: SaveRun) -> None:
    store.save_run(write.record)


def _append_event(store: RunStore, write: AppendEvent) -> None:
    store.append_event(write.event)


def _save_checkpoint(store: RunStore, write: SaveCheckpoint) -> None:
    store.save_checkpoint(write.checkpoint)


def _add_to_checkpoint(store: RunStore, write: AddToCheckpoint) -> None:
    store.add_to_checkpoint(write.delta)


def _save_mails(store: RunStore, write: SaveMails) -> None:
    store.save_mails(write.mails)


def _set_mails_state(store: RunStore, write: SetMailsState) -> None:
    store.set_mails_state(write.mail_ids, write.state)


def _save_outcome(store: RunStore, write: SaveOutcome) -> None:
    store.save_outcome(write.outcome, write.delivered)


def _outcome_delivered(store: RunStore, write: OutcomeDelivered) -> None:
    store.mark_outcome_delivered(write.run_id)


def _post_command(store: RunStore, write: PostCommand) -> None:
    store.post_command(write.kind, write.run_id, write.content)


def _save_journal(store: RunStore, write: SaveJournal) -> None:
    store.save_journal(write.run_id, write.entries)
    if write.read_mail:
        store.set_mails_state(write.read_mail, MailState.READ)


def _release_lease(store: RunStore, write: ReleaseLease) -> None:
    store.release_lease(write.owner)


def _save_approval(store: RunStore, write: SaveApproval) -> None:
    store.save_approval(write.approval)


def _save_subscription(store: RunStore, write: SaveSubscription) -> None:
    store.save_subscription(write.subscription)


def _drop_subscriptions(store: RunStore, write: DropSubscriptions) -> None:
    store.drop_subscriptions(write.run_id, write.topics)


def _save_preview(store: RunStore, write: SavePreview) -> None:
    store.save_preview(write.preview)


def _drop_preview(store: RunStore, write: DropPreview) -> None:
    store.drop_preview(write.run_id)


_APPLY: dict[type[Any], Callable[[RunStore, Any], None]] = {
    SaveRun: _save_run,
    AppendEvent: _append_event,
    SaveCheckpoint: _save_checkpoint,
    AddToCheckpoint: _add_to_checkpoint,
    SaveMails: _save_mails,
    SetMailsState: _set_mails_state,
    SaveOutcome: _save_outcome,
    OutcomeDelivered: _outcome_delivered,
    PostCommand: _post_command,
    SaveJournal: _save_journal,
    ReleaseLease: _release_lease,
    SaveApproval: _save_approval,
    SaveSubscription: _save_subscription,
    DropSubscriptions: _drop_subscriptions,
    SavePreview: _save_preview,
    DropPreview: _drop_preview,
}
"""The store call of each kind of write (a lookup by type: every write of a mail stream
passes here)."""

APPLY = _APPLY
"""``_APPLY``, for a store's own ``_apply_batch`` (``sqlite_events.write_holding_events``)."""


def apply_writes(store: RunStore, writes: Iterable[Write]) -> None:
    """Carry out ``writes`` in order (the caller holds the batch they belong to)."""
    apply = _APPLY
    for write in writes:
        apply[type(write)](store, write)


def write_all(store: RunStore, writes: Sequence[Write]) -> None:
    """``writes`` in one batch of ``store`` (nested in its open one, if any), in order.

    Inside the batch they go where the store says its writes may go once a batch is open
    (``writes_go_to``: a ``FencedStore``'s inner store, its fence checked as the batch
    opened), not through a batch of their own each. A run saved more than once among them
    is saved once, at the place of its last save (``superseded``): a decision that changes a
    run twice records it as the two saves in a row left it."""
    with store.batch():
        target = getattr(store, "writes_go_to", store)
        # a store that takes a batch's writes in one call (``MemoryStore._apply_batch``,
        # which finds its superseded saves itself, if it must); looked up on its class: a
        # wrapper delegating attributes is never bypassed
        apply_batch = getattr(type(target), "_apply_batch", None)
        if apply_batch is not None:
            apply_batch(target, writes)
            return
        skip = superseded(writes) if len(writes) > 1 else ()
        apply = _APPLY
        if not skip:  # most batches (a run is saved once per decision)
            for write in writes:
                apply[type(write)](target, write)
            return
        for i, write in enumerate(writes):
            if i not in skip:
                apply[type(write)](target, write)


def superseded(writes: Sequence[Write]) -> set[int]:
    """The places of the ``SaveRun`` writes a later ``SaveRun`` of the same run replaces.
    A save writes a run's whole record and no write reads it, so the last one of a run
    decides what the batch leaves in the store; except that a save with a live status also
    takes a run out of the archive (``SQLiteStore``), which a terminal save does not: a
    live save followed by a terminal one is kept."""
    skip: set[int] = set()
    if list(map(type, writes)).count(SaveRun) < 2:  # most batches: counted in C, not walked
        return skip
    saves = [(i, write.record) for i, write in enumerate(writes) if type(write) is SaveRun]
    if len({record.run_id for _, record in saves}) == len(saves):
        return skip  # each saved once (a spawn_many, a close): counted in C, not walked
    last: dict[str, tuple[int, RunRecord]] = {}
    for i, record in saves:
        earlier = last.get(record.run_id)
        if earlier is not None and (earlier[1].status.terminal or not record.status.terminal):
            skip.add(earlier[0])
        last[record.run_id] = (i, record)
    return skip
