"""SQLiteStore: the durable RunStore, one SQLite file per user (or a path the caller names).

Durability promise: a write is durable once ``batch()`` (or a write made outside any batch)
has returned. The file is in WAL mode with ``synchronous=NORMAL``: each commit appends to the
write-ahead log with ``write()`` before returning, and the log is synced to disk at
checkpoints. That survives the death of the process at any instant (SIGKILL, a crash, an
out-of-memory kill), which is what the runtime promises: nothing acknowledged is lost when
the runtime dies. It does not promise the last commits survive a power cut or a kernel crash
(the database stays consistent, but the newest transactions may roll back); ``FULL`` would,
at the price of an fsync per commit, which would make group commit the bottleneck of every
step. WAL also lets other processes (``subagents ps``) read while the runtime writes, and lets
them post commands, waiting at most the busy timeout for the writer's lock.

Thread model and atomicity (one connection under one lock, batches as transactions, nested
batches as savepoints, held writes): ``store.sqlite_tx``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Collection, Iterable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from subagents.logs import get_logger
from subagents.messages import (
    TERMINAL_STATUSES,
    ApprovalRecord,
    Checkpoint,
    CheckpointDelta,
    Cleanup,
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
    StoredEvent,
    Subscription,
)
from subagents.store.base import DamagedRow, MailRecording, RunStore, StoreError
from subagents.store.dbfile import OPEN_FILES
from subagents.store.errors import translate
from subagents.store.migrations import SCHEMA_VERSION
from subagents.store.paths import default_store_path
from subagents.store.schema import read_meta
from subagents.store.sqlite_approvals import ApprovalRows
from subagents.store.sqlite_events import EventRows, write_holding_events
from subagents.store.sqlite_mail import MailRows
from subagents.store.sqlite_open import cap, connect, opened
from subagents.store.sqlite_outcomes import OutcomeRows
from subagents.store.sqlite_previews import PreviewRows
from subagents.store.sqlite_processes import ProcessRows
from subagents.store.sqlite_record import SenderRecords
from subagents.store.sqlite_resume import ResumeRows
from subagents.store.sqlite_sweep import sweep_runs
from subagents.store.sqlite_topics import TopicRows
from subagents.store.sqlite_tx import Transactions, encode_row, spare_damaged
from subagents.store.sqlite_wal import WalCheckpointer
from subagents.store.sweep import SweepReport

log = get_logger("subagents.store")

T = TypeVar("T")

_TERMINAL = tuple(sorted(s.value for s in TERMINAL_STATUSES))

_run_decoder = msgspec.json.Decoder(RunRecord)


_SAVE_RUN = f"""INSERT INTO runs (run_id, agent, status, root_run_id, parent_run_id, depth,
        created_at, ended_at, cleanup, restarts, retries, record)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (run_id) DO UPDATE SET
        agent = excluded.agent, status = excluded.status, root_run_id = excluded.root_run_id,
        parent_run_id = excluded.parent_run_id, depth = excluded.depth,
        created_at = excluded.created_at, ended_at = excluded.ended_at,
        cleanup = excluded.cleanup, restarts = excluded.restarts, retries = excluded.retries,
        record = excluded.record,
        archived_at = CASE WHEN {" OR ".join(["excluded.status = ?"] * len(_TERMINAL))}
                      THEN archived_at ELSE NULL END"""
"""Upsert of a run; a run saved again with a live status (a restart) is no longer archived."""


def _marks(n: int) -> str:
    return ", ".join("?" * n)


_Entries = Sequence[JournalEntry]
_Check = Callable[[], None] | None
"""A further check in a sender's record's transaction (``save_mails_fenced``)."""


_IDS_A_STATEMENT = 500
"""Ids per ``get_runs`` statement: SQLite before 3.32 (Ubuntu 20.04's, RHEL 8's) takes at
most 999 values a statement, fewer than a caller's ``READ_SLICE``."""


def _read_runs(tx: Transactions, run_ids: Collection[str]) -> dict[str, RunRecord]:
    """``SQLiteStore.get_runs``: ``_IDS_A_STATEMENT`` ids a statement."""
    ids = list(dict.fromkeys(run_ids))
    found: dict[str, RunRecord] = {}
    for at in range(0, len(ids), _IDS_A_STATEMENT):
        part = ids[at : at + _IDS_A_STATEMENT]
        rows = tx.read(
            f"SELECT run_id, record FROM runs WHERE run_id IN ({_marks(len(part))})",
            tuple(part),
            f"reading {len(part)} runs",
        )
        for run_id, raw in rows:
            found[run_id] = tx.decode(_run_decoder, raw, "runs", run_id)
    return found


class SQLiteStore(RunStore):
    """The RunStore protocol in a SQLite file (see the module docstring for the promises).

    ``path``: the file; None means the user's state directory (``store.paths``).
    ``busy_timeout``: seconds a write waits for another process's write lock.
    ``max_bytes``: an optional cap on the file's size; writes past it fail as a full disk.
    """

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        busy_timeout: float = 5.0,
        max_bytes: int | None = None,
    ) -> None:
        if max_bytes is not None and max_bytes <= 0:
            raise ValueError(f"max_bytes must be a positive number of bytes, got {max_bytes!r}")
        if not busy_timeout >= 0:
            raise ValueError(f"busy_timeout must be a number of seconds >= 0, got {busy_timeout!r}")
        self.path = Path(path).expanduser() if path is not None else default_store_path()
        path = self.path
        # the file is opened with plain descriptors only while no store of this process has
        # it open: closing one would drop this process's SQLite locks (``dbfile.OpenFiles``)
        conn, key = OPEN_FILES.open(path, lambda: connect(path, busy_timeout))
        try:
            self.found_version, self.schema_version = opened(conn, path, busy_timeout, max_bytes)
        except BaseException:
            with OPEN_FILES.closing(key):
                conn.close()
            raise
        self._tx = Transactions(self.path, conn, on_close=lambda: OPEN_FILES.closing(key))
        self._processes = ProcessRows(self._tx)
        self._mail = MailRows(self._tx, conn)
        self._resume = ResumeRows(self._tx)
        self._approvals = ApprovalRows(self._tx)
        self._topics = TopicRows(self._tx)
        self._events = EventRows(self._tx)
        self._previews = PreviewRows(self._tx)
        self._outcomes = OutcomeRows(self._tx)
        self._records = SenderRecords(self._tx, self._mail, self._processes, self._resume)
        self._wal = WalCheckpointer(self.path, busy_timeout, self._tx)
        log.debug("store.opened", path=str(self.path), schema_version=self.schema_version)

    def batch(self) -> AbstractContextManager[None]:
        return self._tx.batch()

    def batch_begun(self) -> bool:
        """Whether this thread's open batch has begun its transaction (a read, a direct write:
        ``store.sqlite_tx``), holding the write lock until it ends: the supervisor then
        commits its group at once rather than let it linger (``actors/group_linger.py``)."""
        return self._tx.begun

    def fenced_batch(self, owner: str, epoch: int) -> AbstractContextManager[None]:
        """A batch whose transaction, when it begins, first checks that ``owner`` still
        holds its lease at ``epoch`` (``check_fence``; ``store.fencing``). Its transaction
        begins lazily (``store.sqlite_tx``): only then is the fence checked and the write
        lock taken, so the supervisor's open group does not hold them while it decides."""
        return self._tx.batch(on_begin=lambda: self._processes.check_fence(owner, epoch))

    # -----------------------------------------------------------------------------------------
    # runs and transitions
    # -----------------------------------------------------------------------------------------

    def save_run(self, record: RunRecord) -> None:
        self._tx.defer(
            "runs",
            _SAVE_RUN,
            (
                record.run_id,
                record.agent,
                record.status.value,
                record.root_run_id,
                record.parent_run_id,
                record.depth,
                record.created_at,
                record.ended_at,
                record.cleanup,
                record.restarts,
                record.retries,
                encode_row(record, _run_decoder, f"run {record.run_id}"),
                *_TERMINAL,
            ),
            f"saving run {record.run_id}",
        )

    def get_run(self, run_id: str) -> RunRecord | None:
        rows = self._tx.read(
            "SELECT record FROM runs WHERE run_id = ?", (run_id,), f"reading run {run_id}"
        )
        return self._tx.decode(_run_decoder, rows[0][0], "runs", run_id) if rows else None

    def get_runs(self, run_ids: Collection[str]) -> dict[str, RunRecord]:
        return _read_runs(self._tx, run_ids)

    def ended_among(self, run_ids: Collection[str]) -> list[str]:
        return self._processes.ended_among(run_ids)  # (the ids alone, by their ``status``)

    def ended_by_others(self) -> list[str] | None:
        return None if self._processes.written_elsewhere() else []  # (``data_version``)

    def list_runs(
        self,
        *,
        statuses: Iterable[RunStatus] | None = None,
        root_run_id: str | None = None,
        agent: str | None = None,
        limit: int | None = None,
        include_archived: bool = False,
        damaged: list[DamagedRow] | None = None,
    ) -> list[RunRecord]:
        """``include_archived``: archived runs too (``sweep``); ``damaged``: ``spare_damaged``."""
        where: list[str] = []
        params: list[Any] = []
        if statuses is not None:
            wanted = sorted({RunStatus(s).value for s in statuses})
            if not wanted:
                return []
            where.append(f"status IN ({_marks(len(wanted))})")
            params.extend(wanted)
        if root_run_id is not None:
            where.append("root_run_id = ?")
            params.append(root_run_id)
        if agent is not None:
            where.append("agent = ?")
            params.append(agent)
        if not include_archived:
            where.append("archived_at IS NULL")
        sql = "SELECT run_id, record, parent_run_id FROM runs"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY created_at, run_id"
        if limit is not None and limit >= 0:
            sql += " LIMIT ?"
            params.append(limit)
        rows = self._tx.read(sql, params, "listing runs")
        records = spare_damaged(self._tx.decode, _run_decoder, "runs", rows, damaged)
        return records[:limit] if limit is not None and limit < 0 else records

    def run_ids(self) -> list[str]:
        """Every run's id, archived ones too, in no order: what the views need to show runs by
        their unique suffixes, and to find the run a suffix names, read without decoding a
        record (a store of 100,000 runs: a tenth of a second, not seconds)."""
        rows = self._tx.read("SELECT run_id FROM runs", (), "listing the run ids")
        return [str(run_id) for (run_id,) in rows]

    # the event log and its stream (store.sqlite_events)

    def append_event(self, event: Event) -> None:
        self._events.append_event(event)

    _apply_batch = write_holding_events  # (``write_all``'s hook: a line's events in one call)

    def events(self, run_id: str) -> list[Event]:
        return self._events.events(run_id)

    def events_after(self, seq: int, *, limit: int = 1000) -> list[StoredEvent]:
        return self._events.events_after(seq, limit=limit)

    def last_event_seq(self) -> int:
        return self._events.last_event_seq()

    # live previews: scratch for viewers in other processes (store.sqlite_previews)

    def save_preview(self, preview: Preview) -> None:
        self._previews.save_preview(preview)

    def drop_preview(self, run_id: str) -> None:
        self._previews.drop_preview(run_id)

    def previews(self, run_ids: Collection[str]) -> dict[str, Preview]:
        return self._previews.previews(run_ids)

    # -----------------------------------------------------------------------------------------
    # conversation checkpoints, function agents' journals (store.sqlite_resume)
    # -----------------------------------------------------------------------------------------

    def save_checkpoint(self, checkpoint: Checkpoint) -> None:
        self._resume.save_checkpoint(checkpoint)

    def add_to_checkpoint(self, delta: CheckpointDelta) -> None:
        self._resume.add_to_checkpoint(delta)

    def load_checkpoint(self, run_id: str) -> Checkpoint | None:
        return self._resume.load_checkpoint(run_id)

    def save_journal(self, run_id: str, entries: Sequence[JournalEntry]) -> None:
        self._resume.save_journal(run_id, entries)

    def journal_of(self, run_id: str) -> list[JournalEntry]:
        return self._resume.journal_of(run_id)

    # -----------------------------------------------------------------------------------------
    # mail (store.sqlite_mail)
    # -----------------------------------------------------------------------------------------

    def mail_recording(self) -> MailRecording:
        """The sender: a batch of its own, serialised with the others by the lock."""
        return MailRecording.SENDER

    def save_mail(self, mail: Mail) -> None:
        self._mail.save_mail(mail)

    def save_mails(self, mails: Sequence[Mail]) -> None:
        self._mail.save_mails(mails)

    def save_mails_fenced(
        self,
        mails: Sequence[Mail],
        owner: str,
        epoch: int,
        journal: _Entries,
        also: _Check = None,
        attempt: tuple[str, int, int] | None = None,
        read: Sequence[str] = (),
    ) -> None:
        """``save_mails`` and their sender's ``journal`` entries (``unsaved_journal.py``) in a
        transaction of its own that checks that ``owner`` still holds its lease at ``epoch``
        (``store.fencing``), then ``also`` (``cluster.record_fence``), then that the sender's
        start is still its run's (``attempt``: the run, and its restarts and retries when the
        start began; refused, a ``StoreError``, if not): a sender's record, one statement
        when it can be (``store.sqlite_record``); the mail those entries say the sender
        ``read`` (``SaveJournal.read_mail``) marked read in it (only mail sent to it)."""
        self._records.record(mails, owner, epoch, journal, also, attempt, read)
        self._wal.nudge()  # a resting checkpointer: the log grows again

    def set_mails_state(self, mail_ids: Sequence[str], state: MailState) -> None:
        self._mail.set_mails_state(mail_ids, state)

    def set_mail_state(self, mail_id: str, state: MailState) -> None:
        self._mail.set_mail_state(mail_id, state)

    def mail_for(self, run_id: str, states: Iterable[MailState] | None = None) -> list[Mail]:
        return self._mail.mail_for(run_id, states)

    # -----------------------------------------------------------------------------------------
    # topic subscriptions (store.sqlite_topics)
    # -----------------------------------------------------------------------------------------

    def save_subscription(self, subscription: Subscription) -> None:
        self._topics.save_subscription(subscription)

    def drop_subscriptions(self, run_id: str, topics: Collection[str] | None = None) -> None:
        self._topics.drop_subscriptions(run_id, topics)

    def subscriptions(self, run_ids: Collection[str] | None = None) -> list[Subscription]:
        return self._topics.subscriptions(run_ids)

    # -----------------------------------------------------------------------------------------
    # outcomes and their delivery to the requester (store.sqlite_outcomes)
    # -----------------------------------------------------------------------------------------

    def save_outcome(self, outcome: Outcome, delivered: bool = False) -> None:
        self._outcomes.save_outcome(outcome, delivered)

    def mark_outcome_delivered(self, run_id: str) -> None:
        self._outcomes.mark_outcome_delivered(run_id)

    def undelivered_outcomes(self) -> list[Outcome]:
        return self._outcomes.undelivered_outcomes()

    # -----------------------------------------------------------------------------------------
    # commands and leases (store.sqlite_processes)
    # -----------------------------------------------------------------------------------------

    def post_command(self, kind: str, run_id: str, content: str | None = None) -> int:
        return self._processes.post_command(kind, run_id, content)

    def take_commands(self, run_ids: Collection[str] | None = None) -> list[Command]:
        return self._processes.take_commands(run_ids)

    def pending_command_runs(self) -> list[str]:
        return self._processes.pending_command_runs()

    # approvals (store.sqlite_approvals)

    def save_approval(self, approval: ApprovalRecord) -> None:
        self._approvals.save(approval)

    def get_approval(self, approval_id: str) -> ApprovalRecord | None:
        return self._approvals.get(approval_id)

    def list_approvals(
        self,
        *,
        pending: bool = True,
        root_run_id: str | None = None,
        run_id: str | None = None,
        damaged: list[DamagedRow] | None = None,
    ) -> list[ApprovalRecord]:
        return self._approvals.listed(pending, root_run_id, run_id, damaged)

    def answer_approval(
        self,
        approval_id: str,
        allow: bool,
        answer: str | None = None,
        remember: str | None = None,
    ) -> ApprovalRecord:
        return self._approvals.answer(approval_id, allow, answer, remember)

    def acquire_lease(self, lease: Lease) -> int:
        return self._processes.acquire_lease(lease)

    def renew_lease(self, lease: Lease) -> bool:
        return self._processes.renew_lease(lease)

    def release_lease(self, owner: str, epoch: int | None = None) -> None:
        self._processes.release_lease(owner, epoch)

    def check_fence(self, owner: str, epoch: int) -> None:
        self._processes.check_fence(owner, epoch)

    def leases(self) -> list[Lease]:
        return self._processes.leases()

    # -----------------------------------------------------------------------------------------
    # the sweeper
    # -----------------------------------------------------------------------------------------

    def sweep(
        self,
        *,
        now: float,
        archive_after_minutes: float = 60,
        cleanup_default: Cleanup = "keep",
        retention_days: float | None = None,
        dry_run: bool = False,
    ) -> SweepReport:
        """Archive, clean and delete finished runs (rules in ``store.sweep``), in one batch
        (``store.sqlite_sweep``). Also purges commands taken before the archive bound.
        ``dry_run``: what it would do, nothing written."""
        return sweep_runs(
            self._tx,
            self.path,
            now=now,
            archive_after_minutes=archive_after_minutes,
            cleanup_default=cleanup_default,
            retention_days=retention_days,
            dry_run=dry_run,
        )

    # -----------------------------------------------------------------------------------------
    # housekeeping
    # -----------------------------------------------------------------------------------------

    def verify(self) -> None:
        """Check every page of the file (``PRAGMA quick_check``); StoreError if damaged.

        Opening the store checks only the header and the schema, so that opening stays cheap
        for a large store; call this when a full check is worth its time.
        """
        rows = self._tx.read("PRAGMA quick_check", (), "checking the database")
        problems = [str(r[0]) for r in rows]
        if problems != ["ok"]:
            shown = "; ".join(problems[:5])
            raise StoreError(f"{self.path}: corrupt database: {shown}")

    def set_max_bytes(self, max_bytes: int | None) -> None:
        """Change the cap on the file's size (None: none but SQLite's and the disk's). To a
        capped store, raising the cap is what freeing space is to a full disk; the tests use
        it so. A cap below the file's size holds it where it is."""
        if max_bytes is not None and max_bytes <= 0:
            raise ValueError(f"max_bytes must be a positive number of bytes, got {max_bytes!r}")
        with self._tx.lock:
            conn = self._tx.connection()
            try:
                cap(conn, max_bytes)
            except sqlite3.Error as exc:
                raise translate(exc, self.path, "setting the size cap") from exc

    def meta(self) -> dict[str, str]:
        """The store's meta table (application, schema_version)."""
        with self._tx.lock:
            conn = self._tx.connection()
            try:
                return read_meta(conn)
            except sqlite3.Error as exc:
                raise translate(exc, self.path, "reading the meta table") from exc

    def checkpoint_in_background(self) -> Callable[..., None]:
        """Checkpoint the write-ahead log from a thread of its own until the returned call
        (or ``close``), not in the commit that makes it long (``store.sqlite_wal``): a
        runtime whose senders record their mail starts it. Several callers share the
        thread; it stops with the last one's call, which takes how long to wait for a pass
        under way (``timeout``: ``sqlite_wal.StopCheckpoints``)."""
        return self._wal.start()

    def close(self) -> None:
        """Close the connection (rolling back an unfinished batch). Idempotent."""
        self._wal.close()
        self._tx.close()

    def __enter__(self) -> SQLiteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SQLiteStore({str(self.path)!r}, schema_version={SCHEMA_VERSION})"
