"""The RunStore protocol: where runs, transitions, checkpoints, mail and outcomes live.

The supervisor is the only writer of runs, mail and outcomes (leases are written by the
runtime's lease keeper, commands by other processes), but for mail a run takes straight to
its recipient: a durable store has its sender record it, in a fenced batch of its own on its
thread (``mail_recording``; docs/architecture.md, "The mail path"). It wraps the writes
that one message causes in ``batch()``, so they share one transaction (group commit), and it
acknowledges nothing (an outcome delivered, a mail accepted, a step taken) before
``batch()`` has returned.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Protocol

from subagents.logs import get_logger
from subagents.messages import (
    COMMAND_KINDS,
    ApprovalRecord,
    Checkpoint,
    CheckpointDelta,
    Command,
    CommandKind,
    Event,
    JournalEntry,
    Lease,
    Mail,
    MailState,
    Outcome,
    Preview,
    RunRecord,
    RunStatus,
    StoredEvent,
    Subscription,
)

log = get_logger("subagents.store")


class MailRecording(enum.StrEnum):
    """Who records mail a run takes straight to its recipient (``RunStore.mail_recording``)."""

    SENDER = "sender"
    SUPERVISOR = "supervisor"
    NONE = "none"
    """No mail goes straight: the supervisor decides and records every one first."""


READ_SLICE = 1000
"""How many ids a caller of a read by ids (``get_runs``) passes at once: one statement (one
round trip to a server, one call to the cluster's head) reads that many; a store whose
database takes fewer values a statement splits them further (an old SQLite's 999)."""


class StoreError(Exception):
    """The store cannot do what was asked (corrupt file, newer schema, full disk...)."""


class UnsureWrite(StoreError):
    """A call whose fate is not known: the store was lost before it answered (the cluster's
    store actor died, or did not answer in time; a PostgreSQL connection lost with its
    ``COMMIT`` sent), so a write in it may or may not have been
    committed. Who decided something in it must read the store before saying what it did
    (``actors.outage``: a root's end in such a write is told as the store keeps it)."""


class AlreadyEnded(StoreError):
    """A run's end written over a run the store keeps ended with another end (a status or
    an end time of its own): refused, in the write's own transaction, and nothing of that
    transaction kept (its events with it). Whichever end lands first is the run's one: a
    late ``COMMIT`` of an end its writer took for lost (``UnsureWrite``) after a recovery
    recorded the run failed, or a recovery's over an end that landed late, each the other.
    ``key``: the run's id, when known. A record saved again with its end unchanged (the
    same status and end time) is no second end and is kept; one saved with a live status
    (a runtime's step or wait of a run another writer ended) is refused too: an end is never
    undone (SQLite's migration ``end_kept``, PostgreSQL v6)."""

    def __init__(self, message: str, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


def second_end(run_id: str, kept: str, written: str, ended: bool = True) -> str:
    """Why a record of status ``written`` (``ended``: an end) over run ``run_id``, kept
    ``kept``, is refused."""
    what = f"a second end ({written})" if ended else f"a save of it as {written} (its end undone)"
    return (
        f"run {run_id} ended already ({kept}): {what} is refused, and nothing of its"
        " transaction is kept"
    )


class DamagedRow(StoreError):
    """A row that is there but does not read as its record (hand-edited, written by a
    tool that knows nothing of its schema): that row is at fault, not the store, which
    goes on serving every other row. ``key``: the row's (a run's id), when known;
    ``table``: its table (``runs``, ``approvals``, ``events``), when known.

    ``placed``: the store could still read where the row hangs in its run tree (columns
    beside the damaged document): then ``parent`` is a runs row's parent run (None: a
    root) or an approvals row's run. A view of one subtree (`tree`, `info`, `attach` of a
    child) names, and fails for, only the damage under what it shows (``cli/damaged.py``);
    an unplaced row may be anywhere in its tree."""

    def __init__(
        self,
        message: str,
        key: str | None = None,
        *,
        table: str | None = None,
        parent: str | None = None,
        placed: bool = False,
    ) -> None:
        super().__init__(message)
        self.key = key
        self.table = table
        self.parent = parent
        self.placed = placed

    @property
    def row(self) -> tuple[str | None, str | None]:
        """Which row this is (its table, its key): two rows of one key in two tables (a
        run's runs row and its events) are two rows, each to be named."""
        return (self.table, self.key)

    def at(self, parent: object) -> DamagedRow:
        """This row placed under ``parent`` (a column the store read beside the damaged
        document), unless that does not read as a run id either (left unplaced)."""
        if parent is None or isinstance(parent, str):
            self.parent, self.placed = parent, True
        return self

    def as_data(self) -> tuple[str, str | None, str | None, str | None, bool]:
        """The row named as plain data (across the cluster's link: ``from_data``)."""
        return (str(self), self.key, self.table, self.parent, self.placed)

    @classmethod
    def from_data(cls, data: Sequence[object]) -> DamagedRow:
        """The row ``as_data`` named (a head of an older release sent only the message and
        the key: then unplaced)."""
        message, key, table, parent, placed = (*data[:5], None, None, False)[:5]

        def text(value: object) -> str | None:
            return value if isinstance(value, str) else None

        return cls(
            str(message), text(key), table=text(table), parent=text(parent), placed=placed is True
        )


def command_kind(kind: str) -> CommandKind:
    """``kind`` if it is a command's (``post_command``), else ``ValueError`` naming it."""
    if kind not in COMMAND_KINDS:
        raise ValueError(
            f"unknown command kind {kind!r}: expected one of {', '.join(COMMAND_KINDS)}"
        )
    return kind


class StoreBusy(StoreError):
    """Another connection held the store's write lock longer than this one waits (SQLite's
    ``busy_timeout``): a long transaction, or a host stopped or hung inside one (SIGSTOP, a
    frozen VM), which holds it until it goes on or dies."""


class Fenced(StoreError):
    """A write of a runtime whose lease is no longer held (``check_fence``): another process
    took its runs over. Nothing of the transaction is kept."""


def fenced_message(owner: str, epoch: int, held: int | None) -> str:
    """Why a write of ``owner`` at ``epoch`` is refused (``held``: the epoch of its lease now,
    if it has one)."""
    now = "it is gone" if held is None else f"it was taken again, epoch {held}"
    return (
        f"fenced: the lease of {owner} (epoch {epoch}) is no longer held ({now}): another"
        " process took its runs over; nothing of this write is kept"
    )


class RunStore(Protocol):
    """The store's protocol, stated here once: what every store promises (``MemoryStore``,
    ``SQLiteStore``, the cluster's ``ClusterStore``).

    Each implementation subclasses it: mypy then checks each method's signature against the
    one here, ``help()`` and ``inspect.getdoc`` show the docstring here on the
    implementation's method, and an implementation's own docstring says only what it adds
    (its cost, what it holds, a narrower promise). tests/store/test_store_protocol.py checks
    that every implementation offers every method with a compatible signature, and that the
    cluster serves every one of them.

    Reads return records as they were committed (or as written inside the open batch);
    a run, mail or journal that is not there reads as None or empty, never as an error. Every
    failure of the store itself is a ``StoreError``; a bad argument is a ``ValueError``.
    """

    def batch(self) -> AbstractContextManager[None]:
        """Group the writes made inside into one committed transaction (a nested batch is a
        savepoint: it raising undoes its own writes only). Nothing is acknowledged to anyone
        before the outermost batch has returned."""
        ...

    def mail_recording(self) -> MailRecording:
        """Who records the mail a run takes straight to its recipient (docs/architecture.md,
        "The mail path"): its sender, in a fenced batch of its own on its thread, before the
        recipient can see it (a store that keeps what it commits past the process and takes
        a batch from any thread); the supervisor, after (a store that keeps nothing past the
        process); or nobody: mail then goes through the supervisor."""
        ...

    # ---- runs and transitions ------------------------------------------------------------

    def save_run(self, record: RunRecord) -> None:
        """Keep ``record`` as its run's (inserted, or replacing the one kept)."""
        ...

    def get_run(self, run_id: str) -> RunRecord | None:
        """The record of ``run_id``; None if the store has none."""
        ...

    def get_runs(self, run_ids: Collection[str]) -> dict[str, RunRecord]:
        """The records of those of ``run_ids`` the store has, by id: one read for them all
        (a recovery checking thousands of runs: ``actors.owed``), not one each. A caller
        with very many ids reads them a slice at a time (``READ_SLICE``)."""
        ...

    def ended_among(self, run_ids: Collection[str]) -> list[str]:
        """Those of ``run_ids`` the store keeps ended (a terminal status): how the runtime's
        look at the runs it holds finds the ones another writer ended (``actors.ends_elsewhere``:
        every held run once a round, ``READ_SLICE`` ids a call). A store may answer from the
        ids and statuses alone (SQLite, PostgreSQL, the cluster's head: no record sent or
        decoded). The default, what a store of one's own inherits: the records read
        (``get_runs``), a damaged one skipped and named in the log, the rest read one by one
        (``ended_in_records``): a look at ends halts nothing for a row it cannot read."""
        return ended_in_records(self, run_ids)

    def ended_by_others(self) -> list[str] | None:
        """The runs another writer (another connection or process, the program holding the
        store) ended since this was last asked, as far as the store can tell: their ids
        (empty: nobody else wrote, so none), or None when it cannot tell which (another
        writer may have written): its one caller, the runtime's look at its held runs'
        ends, then reads every held run, a round of ``ended_among``. A memory store names
        the ends saved through ``save_run`` (the runtime writes through its batches); a
        SQLite store says whether another connection committed (``PRAGMA data_version``:
        empty if none, else None; an end saved through the very ``SQLiteStore`` object the
        runtime holds, its connection, is not seen until another connection commits). The
        default, what a store of one's own inherits (and PostgreSQL's, the cluster's):
        None, a round every poll (``ROUND_S`` at most)."""
        return None

    def list_runs(
        self,
        *,
        statuses: Iterable[RunStatus] | None = None,
        root_run_id: str | None = None,
        agent: str | None = None,
        limit: int | None = None,
    ) -> list[RunRecord]:
        """Runs in creation order, those with one of ``statuses``, of the tree
        ``root_run_id``, of ``agent`` (None: any); at most ``limit`` of them. A store that
        archives finished runs lists them only when asked (``include_archived``)."""
        ...

    def append_event(self, event: Event) -> None:
        """Add ``event`` to its run's events."""
        ...

    def events(self, run_id: str) -> list[Event]:
        """The events of ``run_id``, in the order appended."""
        ...

    def events_after(self, seq: int, *, limit: int = 1000) -> list[StoredEvent]:
        """Every run's events appended after the one numbered ``seq`` (0: from the first),
        in the order appended, at most ``limit`` of them: how a reader follows the whole
        store (`subagents events`, `ps --watch`, the console)."""
        ...

    def last_event_seq(self) -> int:
        """The number of the last event appended (0: none yet): where a reader that wants
        only what comes next starts."""
        ...

    # ---- live previews (what a streaming model has written of the step under way) ---------

    def save_preview(self, preview: Preview) -> None:
        """Keep ``preview`` as its run's, replacing the one kept (scratch: not history)."""
        ...

    def drop_preview(self, run_id: str) -> None:
        """Forget the run's preview (its step was recorded, or it ended)."""
        ...

    def previews(self, run_ids: Collection[str]) -> dict[str, Preview]:
        """The previews kept for those of ``run_ids`` that have one."""
        ...

    # ---- conversation checkpoints --------------------------------------------------------

    def save_checkpoint(self, checkpoint: Checkpoint) -> None:
        """Keep ``checkpoint`` as the run's; the deltas added before it are dropped (it
        holds them already)."""
        ...

    def add_to_checkpoint(self, delta: CheckpointDelta) -> None:
        """Keep one tool call's change to the run's checkpoint, at a cost of the delta's
        size, not the checkpoint's (``CheckpointDelta``)."""
        ...

    def load_checkpoint(self, run_id: str) -> Checkpoint | None:
        """The run's last checkpoint with the deltas of its step applied; None if none."""
        ...

    # ---- mail ----------------------------------------------------------------------------

    def save_mail(self, mail: Mail) -> None:
        """Keep ``mail``; a mail already kept under its ``mail_id`` is left as it is (its
        state included): a record made twice is kept once (a node's sender's record whose
        answer was lost, then the supervisor's of the same mail: ``SendMail.mail_id``)."""
        ...

    def save_mails(self, mails: Sequence[Mail]) -> None:
        """``save_mail`` of each, in order (a burst of sends is one call)."""
        ...

    def set_mail_state(self, mail_id: str, state: MailState) -> None:
        """Move a kept mail to ``state``; nothing for a mail the store does not have."""
        ...

    def set_mails_state(self, mail_ids: Sequence[str], state: MailState) -> None:
        """``set_mail_state`` of each (a run's read receipts are one call)."""
        ...

    def mail_for(self, run_id: str, states: Iterable[MailState] | None = None) -> list[Mail]:
        """The mail ``run_id`` sent or received, in the order kept; only in ``states`` when
        given."""
        ...

    # ---- function agents' journals (what a resumed function agent replays) ---------------

    def save_journal(self, run_id: str, entries: Sequence[JournalEntry]) -> None:
        """Append ``entries`` (one handling's calls and results) to ``run_id``'s journal."""
        ...

    def journal_of(self, run_id: str) -> list[JournalEntry]:
        """``run_id``'s journal, every entry in the order written."""
        ...

    # ---- topics: the runs subscribed to each (supervision/topics.py) ----------------------

    def save_subscription(self, subscription: Subscription) -> None:
        """Keep ``subscription`` (nothing when it is kept already)."""
        ...

    def drop_subscriptions(self, run_id: str, topics: Collection[str] | None = None) -> None:
        """Forget the subscriptions of ``run_id`` to ``topics`` (None: all of them)."""
        ...

    def subscriptions(self, run_ids: Collection[str] | None = None) -> list[Subscription]:
        """The subscriptions kept (of ``run_ids``, when given), in the order they were made."""
        ...

    # ---- outcomes and their delivery to the requester ------------------------------------

    def save_outcome(self, outcome: Outcome, delivered: bool = False) -> None:
        """Keep how a run ended, not yet delivered to its requester (``delivered``: handed
        to it in the same transaction, as ``mark_outcome_delivered`` after it would say)."""
        ...

    def mark_outcome_delivered(self, run_id: str) -> None:
        """The outcome of ``run_id`` reached its requester (a restore need not hand it
        again)."""
        ...

    def undelivered_outcomes(self) -> list[Outcome]:
        """The outcomes kept but not yet delivered (a restore hands them again)."""
        ...

    # ---- commands from other processes ---------------------------------------------------

    def post_command(self, kind: str, run_id: str, content: str | None = None) -> int:
        """Queue a command (``COMMAND_KINDS``: stop, send, approval) for the runtime that hosts
        ``run_id``; safe from any process. Its id; ``ValueError`` for an unknown kind."""
        ...

    def take_commands(self, run_ids: Collection[str] | None = None) -> list[Command]:
        """Claim pending commands, oldest first (only those for ``run_ids`` when given):
        each is returned to exactly one taker; inside a batch the claim commits with it."""
        ...

    def pending_command_runs(self) -> list[str]:
        """The runs that have commands not taken yet, each once, in the order of their
        oldest: a read, so that a taker claims (``take_commands``) only the runs of these it
        hosts, or whose tree nobody hosts any more, without naming every run it holds."""
        ...

    # ---- durable approvals: asks waiting for a person (messages.approvals) ----------------

    def save_approval(self, approval: ApprovalRecord) -> None:
        """Keep a pending approval. One already kept under its id stays as it is (a run asking
        again after a restart): if it was answered, its answer is posted again for the run
        (an ``approval`` command), in the same transaction."""
        ...

    def get_approval(self, approval_id: str) -> ApprovalRecord | None:
        """The approval kept under ``approval_id``; None if none."""
        ...

    def list_approvals(
        self,
        *,
        pending: bool = True,
        root_run_id: str | None = None,
        run_id: str | None = None,
        damaged: list[DamagedRow] | None = None,
    ) -> list[ApprovalRecord]:
        """Approvals in the order asked: with ``pending``, those still waiting for an answer
        whose run has not ended; of the tree ``root_run_id``, of the run ``run_id``. A row
        that does not read raises ``DamagedRow``; with ``damaged`` given (a listing: the
        CLI's, the console's) it is left out and named there, the others listed (a store
        of objects has none)."""
        ...

    def answer_approval(
        self,
        approval_id: str,
        allow: bool,
        answer: str | None = None,
        remember: str | None = None,
    ) -> ApprovalRecord:
        """Answer a pending approval, from any process: the answer kept and posted for the
        runtime hosting the run (an ``approval`` command) in one transaction; the approval as
        answered (``remember``, kept only with an allow). ``ApprovalRefused`` (a
        ``ValueError``) naming why for an unknown id, one already answered, or one whose run
        has ended."""
        ...

    # ---- leases: which runtimes are alive (store.leases) ---------------------------------

    def acquire_lease(self, lease: Lease) -> int:
        """Write ``lease`` (a runtime starting, or taking its lease back) with a new epoch,
        one this store never gave before; that epoch."""
        ...

    def renew_lease(self, lease: Lease) -> bool:
        """Renew a held lease (``lease.owner`` at ``lease.epoch``); False when it is gone
        (released by someone else: another process took over this runtime's runs after the
        lease lapsed; or taken again under the same owner)."""
        ...

    def release_lease(self, owner: str, epoch: int | None = None) -> None:
        """Delete the lease of ``owner`` (only at ``epoch``, when given)."""
        ...

    def leases(self) -> list[Lease]:
        """Every lease kept, alive or lapsed (``store.leases.Liveness`` tells which)."""
        ...

    def check_fence(self, owner: str, epoch: int) -> None:
        """Raise ``Fenced`` unless the lease of ``owner`` at ``epoch`` is held. Called first
        in a write transaction (``store.fencing``): the check and the writes commit together,
        so no takeover can come between them."""
        ...

    def close(self) -> None:
        """Done with the store. Idempotent."""
        ...


PROTOCOL_METHODS = tuple(
    name for name, member in vars(RunStore).items() if callable(member) and not name.startswith("_")
)
"""The names of the protocol's methods (a store given to a runtime is checked for each)."""


def ended_in_records(store: RunStore, run_ids: Collection[str]) -> list[str]:
    """Those of ``run_ids`` whose record ``store`` keeps ended, their records read
    (``RunStore.ended_among``'s default). A damaged record (a row that does not read as
    one) is skipped, named in the log, and the rest read one by one: a look at ends stops
    no run and halts no runtime for a row it cannot read."""
    try:
        stored = store.get_runs(run_ids)
    except DamagedRow:
        stored = {}
        for run_id in run_ids:
            try:
                record = store.get_run(run_id)
            except DamagedRow as exc:
                log.warning(
                    "a held run's record cannot be read: its end not looked at", error=str(exc)
                )
                continue
            if record is not None:
                stored[run_id] = record
    return [r for r, record in stored.items() if record.status.terminal]
