"""Fencing: a runtime writes only while it holds its lease, checked in every write transaction.

Why: a host stalled past its lease (SIGSTOP, swapping, a frozen VM) has its runs taken over
by another runtime (``store.leases``; the taker releases the lapsed lease in the transaction
that takes the runs). When the stalled host wakes, its threads carry on from where they were:
an agent's step ends, the supervisor records it. Telling it "you lost your lease" at its next
renewal comes too late for writes already on their way; so instead every write transaction
of a runtime begins by checking, inside the transaction, that the lease it took (its owner
and the epoch the store gave that taking, ``Lease.epoch``) is still the store's. The takeover
and the check are serialised by the store's write lock: either the write commits before the
takeover (which then sees it), or the check finds the lease gone and the whole transaction is
refused (``Fenced``), nothing of it written.

``FencedStore`` is the store as the supervisor sees it: every ``batch()`` (the outermost one
of its thread) runs ``check_fence`` first (with SQLite, first in its transaction when that
begins: ``SQLiteStore.fenced_batch``), and every write made outside a batch gets a batch
of its own (one made inside goes to the store as it is: its batch is fenced). Reads pass
through. A thread other than the supervisor's writes through it too: a run recording the
mail it takes straight to its recipient (``actors/mail_desk.py``) and the journal entries it
told before it, in a fenced transaction of its own (``record_mails``:
``SQLiteStore.save_mails_fenced`` when the store has it). On a cluster the
check is one more call in the batch sent to the head, run there inside the transaction that
applies it (``cluster.store_service``).

A sender's record is fenced per attempt too: it carries its start (``AttemptFence``), and its
transaction reads the run's record (SQLite: its status and counts alone, in the record's one
statement, ``store.sqlite_record``) and refuses it (``AttemptOver``) once the run ended or was
restarted or retried since. A start can be over while its thread still works (a timeout, a
stop, a retry decided by its child's failure); what it records then must not land after the
run's end or under the next start's keys (docs/store.md, "Fencing").
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Collection, Iterable, Sequence
from contextlib import AbstractContextManager
from types import TracebackType
from typing import Any, TypeVar

import msgspec

from subagents.messages import (
    ApprovalRecord,
    Checkpoint,
    CheckpointDelta,
    Command,
    Event,
    JournalEntry,
    Lease,
    Mail,
    MailState,
    Outcome,
    Preview,
    RunRecord,
    RunStatus,
    Subscription,
)
from subagents.store.base import MailRecording, RunStore, StoreError
from subagents.store.writes import AttemptFence, SaveJournal, Write, write_all

T = TypeVar("T")


class AttemptOver(StoreError):
    """A sender's record of mail from a start of its run that is over (``AttemptFence``):
    the run ended, or was restarted or retried, since. Nothing of the transaction is kept;
    the mail goes by the supervisor, which refuses what an ended start still sends."""


class Fence(msgspec.Struct, frozen=True):
    """The lease a runtime writes under: its owner and the epoch the store gave it."""

    owner: str
    epoch: int


class _FencedBatch:
    """The inner store's batch; the outermost one of a thread checks the fence first (when
    its transaction begins, with a store whose batches begin lazily: ``fenced_batch``). A
    class, not a generator: the supervisor opens one per message it handles."""

    __slots__ = ("_check", "_fenced", "_inner")

    def __init__(self, fenced: FencedStore) -> None:
        self._fenced = fenced
        fence = fenced.fence
        lazy = fenced.lazy_batch
        if fence is not None and lazy is not None:
            self._inner = lazy(fence.owner, fence.epoch)
            self._check = False
        else:
            self._inner = fenced.store.batch()
            self._check = fence is not None

    def __enter__(self) -> None:
        fenced = self._fenced
        local = fenced._local
        self._inner.__enter__()
        depth = local.depth
        local.depth = depth + 1
        fence = fenced.fence
        if self._check and fence is not None:
            try:
                fenced.store.check_fence(fence.owner, fence.epoch)
            except BaseException as exc:
                local.depth = depth
                self._inner.__exit__(type(exc), exc, exc.__traceback__)
                raise

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        self._fenced._local.depth -= 1
        return self._inner.__exit__(kind, exc, tb)


class _Depth(threading.local):
    """How many fenced batches this thread has open on one ``FencedStore``: 0 unless set,
    read from the class (a ``getattr`` with a default on a thread that never set it, every
    sender's record of its mail, raised and caught an ``AttributeError``: ~1 us of ~0.2)."""

    depth: int = 0


class FencedStore:
    """``store`` with every write transaction fenced by ``fence`` (None: not yet; the lease
    keeper sets it when it has taken the lease, before the runtime writes anything)."""

    def __init__(self, store: RunStore, fence: Fence | None = None) -> None:
        self.store = store
        self.writes_go_to: RunStore = store
        """Where the writes of an open batch of this thread may go straight: the inner
        store. The fence was checked when the thread's outermost batch opened, which is all
        a write through ``FencedStore`` adds (with a nested batch of the inner store per
        write: ~10 per spawn, each a lock or a SAVEPOINT mark). ``store.writes.write_all``;
        an attribute, not a property: read by every decision's writes (a call each)."""
        self.fence = fence
        self._local = _Depth()
        self.lazy_batch: Callable[[str, int], AbstractContextManager[None]] | None = getattr(
            store, "fenced_batch", None
        )
        """The store's batch that checks a fence when its transaction begins, if it has one
        (``SQLiteStore.fenced_batch``): a batch that writes nothing checks nothing."""
        self._fenced_mails: Callable[..., None] | None = getattr(store, "save_mails_fenced", None)
        """The store's write of mails in a fenced transaction of their own, if it has one."""
        apply_batch = getattr(type(store), "_apply_batch", None)
        one_call = self.lazy_batch is None and getattr(type(store), "_batch_is_lock", False)
        self._apply_fenced: Callable[..., None] | None = apply_batch if one_call else None
        """The store's batch of writes in one call with its fence checked in it, if it has
        one (``MemoryStore._apply_batch``, looked up on its class as ``write_all`` does) and
        its ``batch`` is no more than that call's lock (not a subclass's own): ``write_batch``."""

    def __getattr__(self, name: str) -> Any:
        """What else the store offers (its ``path``, ...), as it is."""
        return getattr(self.store, name)

    def batch(self) -> AbstractContextManager[None]:
        if self._local.depth:  # inside this thread's fenced batch: checked
            return self.store.batch()  # (each write opens one: ~10 per spawn)
        return _FencedBatch(self)

    def write_batch(self, writes: Sequence[Write]) -> None:
        """``write_all(self, writes)``: a decision's writes in one fenced batch. With a store
        that takes a batch in one call and checks the fence in it (``MemoryStore``), and no
        batch open on this thread, that one call is all: its lock held once for the fence
        and the writes, not a ``_FencedBatch`` opened around them, the lock taken again for
        the check, and the store looked up again (the supervisor's writes of a decision
        decided alone, two per trivial run: ~9 calls each)."""
        apply, fence = self._apply_fenced, self.fence
        if apply is None or fence is None or self._local.depth:
            write_all(self, writes)
            return
        apply(self.store, writes, (fence.owner, fence.epoch))

    def sweep(self, **kwargs: Any) -> Any:
        """The store's sweeper (if it has one: ``SQLiteStore``), fenced like any write."""
        sweep = getattr(self.store, "sweep", None)
        if sweep is None:
            return None
        with self.batch():
            return sweep(**kwargs)

    # ---- writes: inside a fenced batch --------------------------------------------------

    def _write(self, write: Callable[..., T], *args: Any) -> T:
        """``write(*args)`` in a fenced batch: the one open on this thread (its outermost
        checked the fence already: a batch of its own per write cost the supervisor several
        savepoints per message), else one of its own."""
        if self._local.depth:
            return write(*args)
        with self.batch():
            return write(*args)

    def save_run(self, record: RunRecord) -> None:
        self._write(self.store.save_run, record)

    def append_event(self, event: Event) -> None:
        self._write(self.store.append_event, event)

    def save_preview(self, preview: Preview) -> None:
        with self.batch():
            self.store.save_preview(preview)

    def drop_preview(self, run_id: str) -> None:
        with self.batch():
            self.store.drop_preview(run_id)

    def save_checkpoint(self, checkpoint: Checkpoint) -> None:
        self._write(self.store.save_checkpoint, checkpoint)

    def add_to_checkpoint(self, delta: CheckpointDelta) -> None:
        self._write(self.store.add_to_checkpoint, delta)

    def save_mail(self, mail: Mail) -> None:
        self._write(self.store.save_mail, mail)

    def save_mails(self, mails: Sequence[Mail]) -> None:
        self._write(self.store.save_mails, mails)

    def record_mails(
        self,
        mails: Sequence[Mail],
        journal: SaveJournal | None = None,
        attempt: AttemptFence | None = None,
        also: Callable[[], None] | None = None,
    ) -> None:
        """A sender's record of the mail it takes straight to its recipients
        (actors/mail_desk.py), with ``journal``, the entries it told before that must not be
        lost while the mail is kept (supervision/unsaved_journal.py): one transaction, the
        fence in it, then ``also`` (a node's sender's record: that its node was not
        declared lost, ``cluster.record_fence``), then that the sender's start, ``attempt``,
        is still its run's (``AttemptOver`` if not: nothing of it is kept)."""
        fence = self.fence
        if fence is not None and self._fenced_mails is not None and not self._local.depth:
            # the store's write as it is, the start checked by the store (SQLite: from the
            # run's counts alone, in the same statement: ``store.sqlite_record``)
            entries, read = (
                (journal.entries, journal.read_mail) if journal is not None else ((), ())
            )
            start = None if attempt is None else (attempt.run_id, attempt.restarts, attempt.retries)
            self._fenced_mails(mails, fence.owner, fence.epoch, entries, also, start, read)
            return
        if attempt is not None:
            also = self._attempt_check(attempt, also)
        with self.batch():
            if also is not None:
                also()
            self.store.save_mails(mails)
            if journal is not None:
                self.store.save_journal(journal.run_id, journal.entries)
                if journal.read_mail:
                    self.store.set_mails_state(self._its_own(journal), MailState.READ)

    def _its_own(self, journal: SaveJournal) -> list[str]:
        """The mail of ``journal.read_mail`` sent to its run: only those are marked read, as
        SQLite's statement does (``recipient = ?``); a receipt naming another run's mail
        (a bug, a hostile journal) marked it read here, on every store without SQLite's
        statement (PostgreSQL, memory, a store of one's own; SQLite inside a batch)."""
        wanted, run_id = set(journal.read_mail), journal.run_id
        mine = {  # (``mail_for`` lists the mail the run sent too: not its to mark read)
            m.mail_id
            for m in self.store.mail_for(run_id)
            if m.mail_id in wanted and m.recipient == run_id
        }
        return [mail_id for mail_id in journal.read_mail if mail_id in mine]

    def _attempt_check(
        self, attempt: AttemptFence, also: Callable[[], None] | None
    ) -> Callable[[], None]:
        """``also``, then the check that ``attempt`` is still its run's start: the run's
        record read in the record's transaction (the write lock held: the supervisor's
        commit of a restart, a retry or an end is wholly before it or after it)."""
        get_run = self.store.get_run

        def check() -> None:
            if also is not None:
                also()
            refusal = attempt.refusal(get_run(attempt.run_id))
            if refusal is not None:
                raise AttemptOver(refusal)

        return check

    def set_mail_state(self, mail_id: str, state: MailState) -> None:
        self._write(self.store.set_mail_state, mail_id, state)

    def set_mails_state(self, mail_ids: Sequence[str], state: MailState) -> None:
        self._write(self.store.set_mails_state, mail_ids, state)

    def save_journal(self, run_id: str, entries: Sequence[JournalEntry]) -> None:
        self._write(self.store.save_journal, run_id, entries)

    def save_subscription(self, subscription: Subscription) -> None:
        with self.batch():
            self.store.save_subscription(subscription)

    def drop_subscriptions(self, run_id: str, topics: Collection[str] | None = None) -> None:
        with self.batch():
            self.store.drop_subscriptions(run_id, topics)

    def save_outcome(self, outcome: Outcome, delivered: bool = False) -> None:
        self._write(self.store.save_outcome, outcome, delivered)

    def mark_outcome_delivered(self, run_id: str) -> None:
        self._write(self.store.mark_outcome_delivered, run_id)

    def save_approval(self, approval: ApprovalRecord) -> None:
        with self.batch():
            self.store.save_approval(approval)

    def post_command(self, kind: str, run_id: str, content: str | None = None) -> int:
        return self._write(self.store.post_command, kind, run_id, content)

    def take_commands(self, run_ids: Collection[str] | None = None) -> list[Command]:
        return self._write(self.store.take_commands, run_ids)

    def release_lease(self, owner: str, epoch: int | None = None) -> None:
        """Another owner's lapsed lease, released by the takeover of its runs."""
        self._write(self.store.release_lease, owner, epoch)

    # ---- this runtime's own lease, and reads: as they are --------------------------------

    def mail_recording(self) -> MailRecording:
        return self.store.mail_recording()

    def acquire_lease(self, lease: Lease) -> int:
        return self.store.acquire_lease(lease)

    def renew_lease(self, lease: Lease) -> bool:
        return self.store.renew_lease(lease)

    def check_fence(self, owner: str, epoch: int) -> None:
        self.store.check_fence(owner, epoch)

    def get_run(self, run_id: str) -> RunRecord | None:
        return self.store.get_run(run_id)

    def get_runs(self, run_ids: Collection[str]) -> dict[str, RunRecord]:
        return self.store.get_runs(run_ids)

    def list_runs(
        self,
        *,
        statuses: Iterable[RunStatus] | None = None,
        root_run_id: str | None = None,
        agent: str | None = None,
        limit: int | None = None,
    ) -> list[RunRecord]:
        return self.store.list_runs(
            statuses=statuses, root_run_id=root_run_id, agent=agent, limit=limit
        )

    def ended_among(self, run_ids: Collection[str]) -> list[str]:
        return self.store.ended_among(run_ids)

    def ended_by_others(self) -> list[str] | None:
        return self.store.ended_by_others()

    def events(self, run_id: str) -> list[Event]:
        return self.store.events(run_id)

    def load_checkpoint(self, run_id: str) -> Checkpoint | None:
        return self.store.load_checkpoint(run_id)

    def previews(self, run_ids: Collection[str]) -> dict[str, Preview]:
        return self.store.previews(run_ids)

    def mail_for(self, run_id: str, states: Iterable[MailState] | None = None) -> list[Mail]:
        return self.store.mail_for(run_id, states)

    def journal_of(self, run_id: str) -> list[JournalEntry]:
        return self.store.journal_of(run_id)

    def subscriptions(self, run_ids: Collection[str] | None = None) -> list[Subscription]:
        return self.store.subscriptions(run_ids)

    def undelivered_outcomes(self) -> list[Outcome]:
        return self.store.undelivered_outcomes()

    def leases(self) -> list[Lease]:
        return self.store.leases()

    def close(self) -> None:
        """The store is its owner's to close, not the fence's."""


def batch_writer(store: RunStore) -> Callable[[Sequence[Write]], None]:
    """What writes a decision's writes in one batch of ``store``: its ``write_batch`` when it
    is a ``FencedStore`` (the runtime's supervisor always writes through one), else
    ``write_all`` on it (a store handed to the supervisor as it is: tests)."""
    if isinstance(store, FencedStore):
        return store.write_batch
    return functools.partial(write_all, store)
