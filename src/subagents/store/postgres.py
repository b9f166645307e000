"""PostgresStore: the RunStore protocol on a PostgreSQL server, for teams and clusters.

The same promises as ``SQLiteStore`` (docs/store.md), kept by the server instead of a file:
a write is durable once ``batch()`` (or a write outside a batch) has returned (the server's
``COMMIT``: its write-ahead log flushed, under its ``synchronous_commit``); every write
transaction of a runtime is fenced by its lease (``store.postgres_processes``); several
runtimes, on several machines, share one database and each takes only what is its own or
orphaned. What SQLite does with one file lock, this does with row locks, ``SKIP LOCKED`` and
``NOTIFY`` (``store.postgres_processes``).

Opened from a URL, ``postgresql://user:password@host:port/database`` (libpq's; ``postgres://``
too). The tables live in the schema ``subagents`` of that database, created on first open
(``store.postgres_schema``: versions and migrations). Needs the ``postgres`` extra (psycopg 3).

Transactions, the connection and its loss: ``store.postgres_tx``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any

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
from subagents.store.locations import is_database_url, local_folder, redacted
from subagents.store.lone_surrogates import keys_checked
from subagents.store.postgres_approvals import PgApprovalRows
from subagents.store.postgres_listen import CommandListener
from subagents.store.postgres_login import Login, login_of
from subagents.store.postgres_processes import PgProcessRows
from subagents.store.postgres_rows import PgMailRows, PgResumeRows
from subagents.store.postgres_schema import SCHEMA_VERSION, upgrade
from subagents.store.postgres_sweep import sweep_runs
from subagents.store.postgres_topics import PgTopicRows
from subagents.store.postgres_tx import PgTransactions
from subagents.store.sqlite_tx import encode_row, spare_damaged
from subagents.store.sweep import SweepReport

log = get_logger("subagents.store")

_TERMINAL = sorted(s.value for s in TERMINAL_STATUSES)

_run_decoder = msgspec.json.Decoder(RunRecord)
_event_decoder = msgspec.json.Decoder(Event)
_outcome_decoder = msgspec.json.Decoder(Outcome)

_SAVE_RUN = """INSERT INTO runs (run_id, agent, status, root_run_id, parent_run_id, depth,
        created_at, ended_at, cleanup, record)
    VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
    ON CONFLICT (run_id) DO UPDATE SET
        agent = excluded.agent, status = excluded.status, root_run_id = excluded.root_run_id,
        parent_run_id = excluded.parent_run_id, depth = excluded.depth,
        created_at = excluded.created_at, ended_at = excluded.ended_at,
        cleanup = excluded.cleanup, record = excluded.record,
        archived_at = CASE WHEN excluded.status = ANY(%s) THEN runs.archived_at ELSE NULL END"""
"""Upsert of a run; a run saved again with a live status (a restart) is no longer archived."""

EVENTS_LOCK = 0x5A6E_7404
"""The advisory lock a transaction appending events holds until its commit, so that events
are committed in the order of their numbers (``events_after``): without it a transaction
could commit event 10 after another committed event 11, and a reader that had read up to 11
would never see 10. What it costs: transactions that append events commit one at a time,
across every runtime sharing the database (SQLite's file lock does as much for all of its
writes); the lock is taken with the writes, in the commit's round trip."""


def _schema(tx: PgTransactions, create: bool) -> tuple[int | None, int]:
    """The database of ``tx`` made ready as a store (its schema created or upgraded; the
    transactions closed if it cannot be): the schema versions (found, now)."""
    where = tx.where
    with tx.lock:
        conn = tx.connection()
        try:
            found, version = upgrade(conn, where, create)
        except StoreError:
            tx.close()
            raise
        except Exception as exc:
            tx.close()
            raise StoreError(f"{where}: creating or upgrading the schema: {exc}") from exc
    if found != version:
        log.info(
            "store.upgraded" if found else "store.created",
            url=where,
            from_version=found,
            to_version=version,
        )
    return found, version


class PostgresStore(RunStore):
    """The RunStore protocol on PostgreSQL (see the module docstring for the promises).

    ``url``: the database, ``postgresql://user:password@host:port/database``.
    ``create``: give a database without a store one (False: refuse it, ``StoreError``;
    the inspecting commands, which must not make a store where a URL was mistyped).
    """

    def __init__(self, url: str, *, create: bool = True) -> None:
        if not is_database_url(url):
            raise ValueError(f"a PostgreSQL store needs a postgresql:// URL, got {redacted(url)!r}")
        self.url = url
        self._tx = PgTransactions(url)
        self.where = self._tx.where
        self.found_version, self.schema_version = _schema(self._tx, create)
        self.path = local_folder(url) / "store"
        """No file: a name in this machine's state directory whose folder keeps what is kept
        beside a SQLite file (the last ``ps`` listing, detached hosts' logs)."""
        self._processes = PgProcessRows(self._tx)
        self._mail = PgMailRows(self._tx)
        self._resume = PgResumeRows(self._tx)
        self._approvals = PgApprovalRows(self._tx)
        self._topics = PgTopicRows(self._tx)

    def batch(self) -> AbstractContextManager[None]:
        return self._tx.batch()

    def mail_recording(self) -> MailRecording:
        """Nobody: mail goes through the supervisor, which records it with its decision, in
        the one commit that decision makes anyway. A sender's own fenced batch (SQLite's
        way) is a second commit per mail here (a round trip and, with the server's defaults,
        an fsync) on the store's one connection, which the supervisor then waits for: per-mail
        ping-pong measured 269 mails/s that way against 346 through the supervisor (medians
        of 4 alternated rounds, docs/store.md). The supervisor after (memory's way) would
        lose mail a recipient had acted on in a crash."""
        return MailRecording.NONE

    # ---- runs and transitions -------------------------------------------------------------

    def save_run(self, record: RunRecord) -> None:
        self._tx.defer(
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
                encode_row(record, _run_decoder, f"run {record.run_id}"),
                _TERMINAL,
            ),
            f"saving run {record.run_id}",
        )

    def get_run(self, run_id: str) -> RunRecord | None:
        rows = self._tx.read(
            "SELECT record FROM runs WHERE run_id = %s", (run_id,), f"reading run {run_id}"
        )
        return self._tx.decode(_run_decoder, rows[0][0], "runs", run_id) if rows else None

    def get_runs(self, run_ids: Collection[str]) -> dict[str, RunRecord]:
        ids = list(dict.fromkeys(run_ids))
        if not ids:
            return {}
        rows = self._tx.read(
            "SELECT run_id, record FROM runs WHERE run_id = ANY(%s)",
            (ids,),
            f"reading {len(ids)} runs",
        )
        return {run_id: self._tx.decode(_run_decoder, raw, "runs", run_id) for run_id, raw in rows}

    def ended_among(self, run_ids: Collection[str]) -> list[str]:
        """(Their ids alone, by the ``status`` column: no record sent or decoded.)"""
        rows = self._tx.read(
            "SELECT run_id FROM runs WHERE run_id = ANY(%s) AND status = ANY(%s)",
            (list(run_ids), _TERMINAL),
            f"reading which of {len(run_ids)} runs ended",
        )
        return [row[0] for row in rows]

    def ended_by_others(self) -> list[str] | None:
        return None  # (another runtime's commits are not seen here: a round every poll)

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
            where.append("status = ANY(%s)")
            params.append(wanted)
        if root_run_id is not None:
            where.append("root_run_id = %s")
            params.append(root_run_id)
        if agent is not None:
            where.append("agent = %s")
            params.append(agent)
        if not include_archived:
            where.append("archived_at IS NULL")
        sql = "SELECT run_id, record, parent_run_id FROM runs"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY created_at, run_id"
        if limit is not None and limit >= 0:
            sql += " LIMIT %s"
            params.append(limit)
        rows = self._tx.read(sql, params, "listing runs")
        records = spare_damaged(self._tx.decode, _run_decoder, "runs", rows, damaged)
        return records[:limit] if limit is not None and limit < 0 else records

    def run_ids(self) -> list[str]:
        """Every run's id, archived ones too, in no order, read without decoding a record
        (what the views need to show runs by their unique suffixes)."""
        rows = self._tx.read("SELECT run_id FROM runs", (), "listing the run ids")
        return [str(run_id) for (run_id,) in rows]

    def append_event(self, event: Event) -> None:
        kind = event.kind.value
        doing = f"appending a {kind} event of run {event.run_id}"
        row = (
            event.run_id,
            kind,
            event.ts,
            encode_row(
                event, _event_decoder, f"an event of run {event.run_id} (kind {event.kind})"
            ),
        )
        with self._tx.writing():
            self._tx.lock_once(EVENTS_LOCK, doing)
            self._tx.defer(
                "INSERT INTO events (run_id, kind, ts, event) VALUES (%s, %s, %s, %s)", row, doing
            )

    def events(self, run_id: str) -> list[Event]:
        rows = self._tx.read(
            "SELECT seq, event FROM events WHERE run_id = %s ORDER BY seq",
            (run_id,),
            f"reading the events of run {run_id}",
        )
        return [self._tx.decode(_event_decoder, raw, "events", seq) for seq, raw in rows]

    def events_after(self, seq: int, *, limit: int = 1000) -> list[StoredEvent]:
        """Committed in the order numbered (``EVENTS_LOCK``), so a reader never skips one."""
        rows = self._tx.read(
            "SELECT seq, event FROM events WHERE seq > %s ORDER BY seq LIMIT %s",
            (seq, max(0, limit)),
            f"reading the events after number {seq}",
        )
        return [
            StoredEvent(seq=n, event=self._tx.decode(_event_decoder, raw, "events", n))
            for n, raw in rows
        ]

    def last_event_seq(self) -> int:
        rows = self._tx.read(
            "SELECT COALESCE(MAX(seq), 0) FROM events", (), "reading the last event's number"
        )
        return int(rows[0][0])

    # ---- live previews and topic subscriptions (store.postgres_topics) --------------------

    def save_preview(self, preview: Preview) -> None:
        self._topics.save_preview(preview)

    def drop_preview(self, run_id: str) -> None:
        self._topics.drop_preview(run_id)

    def previews(self, run_ids: Collection[str]) -> dict[str, Preview]:
        return self._topics.previews(run_ids)

    def save_subscription(self, subscription: Subscription) -> None:
        self._topics.save_subscription(subscription)

    def drop_subscriptions(self, run_id: str, topics: Collection[str] | None = None) -> None:
        self._topics.drop_subscriptions(run_id, topics)

    def subscriptions(self, run_ids: Collection[str] | None = None) -> list[Subscription]:
        return self._topics.subscriptions(run_ids)

    # ---- conversation checkpoints and journals (store.postgres_rows) ----------------------

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

    # ---- mail (store.postgres_rows) -------------------------------------------------------

    def save_mail(self, mail: Mail) -> None:
        self._mail.save_mail(mail)

    def save_mails(self, mails: Sequence[Mail]) -> None:
        self._mail.save_mails(mails)

    def set_mail_state(self, mail_id: str, state: MailState) -> None:
        self._mail.set_mail_state(mail_id, state)

    def set_mails_state(self, mail_ids: Sequence[str], state: MailState) -> None:
        self._mail.set_mails_state(mail_ids, state)

    def mail_for(self, run_id: str, states: Iterable[MailState] | None = None) -> list[Mail]:
        return self._mail.mail_for(run_id, states)

    # ---- outcomes -------------------------------------------------------------------------

    def save_outcome(self, outcome: Outcome, delivered: bool = False) -> None:
        self._tx.defer(
            """INSERT INTO outcomes (run_id, status, delivered, outcome)
               VALUES (%s, %s, %s, %s)
               ON CONFLICT (run_id) DO UPDATE SET status = excluded.status,
                   delivered = excluded.delivered, outcome = excluded.outcome""",
            (
                outcome.run_id,
                outcome.status.value,
                delivered,
                encode_row(outcome, _outcome_decoder, f"the outcome of run {outcome.run_id}"),
            ),
            f"saving the outcome of run {outcome.run_id}",
        )

    def mark_outcome_delivered(self, run_id: str) -> None:
        keys_checked("marking an outcome delivered", (run_id,))  # (held raw: refused alone)
        self._tx.defer(
            "UPDATE outcomes SET delivered = true WHERE run_id = %s",
            (run_id,),
            f"marking the outcome of run {run_id} delivered",
        )

    def undelivered_outcomes(self) -> list[Outcome]:
        rows = self._tx.read(
            "SELECT run_id, outcome FROM outcomes WHERE NOT delivered ORDER BY seq",
            (),
            "reading undelivered outcomes",
        )
        return [self._tx.decode(_outcome_decoder, raw, "outcomes", key) for key, raw in rows]

    # ---- commands and leases (store.postgres_processes) -----------------------------------

    def post_command(self, kind: str, run_id: str, content: str | None = None) -> int:
        return self._processes.post_command(kind, run_id, content)

    def take_commands(self, run_ids: Collection[str] | None = None) -> list[Command]:
        return self._processes.take_commands(run_ids)

    def pending_command_runs(self) -> list[str]:
        return self._processes.pending_command_runs()

    # ---- durable approvals (store.postgres_approvals) ------------------------------------

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
        return self._approvals.listed(
            pending=pending,
            root_run_id=root_run_id,
            run_id=run_id,
            terminal=_TERMINAL,
            damaged=damaged,
        )

    def answer_approval(
        self,
        approval_id: str,
        allow: bool,
        answer: str | None = None,
        remember: str | None = None,
    ) -> ApprovalRecord:
        """Two answering at once: the approval's row lock makes the second wait for the
        first's commit and be refused (``store.postgres_approvals``)."""
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
        """Inside a batch (a restore's takeover), the lapsed leases are locked first, and
        one whose owner is writing right now reads as alive (``store.postgres_processes``)."""
        return self._processes.leases()

    def held_in_transaction(self, owners: Collection[str]) -> dict[str, str]:
        """Of ``owners``, those whose lease row an open transaction holds, with what
        ``pg_stat_activity`` says (``subagents resume`` names them: their runs are left to
        them until the transaction ends; ``store.postgres_processes``)."""
        return self._processes.held_in_transaction(owners)

    def listen_commands(self, on_command: Callable[[], object]) -> CommandListener:
        """Call ``on_command()`` as soon as commands are posted (``LISTEN``, on a connection
        and a thread of its own) until the listener is closed: the runtime takes its
        commands at once instead of at its next poll (``store.postgres_listen``)."""
        return CommandListener(self.url, self.where, on_command)

    # ---- the sweeper and housekeeping ----------------------------------------------------

    def sweep(
        self,
        *,
        now: float,
        archive_after_minutes: float = 60,
        cleanup_default: Cleanup = "keep",
        retention_days: float | None = None,
        dry_run: bool = False,
    ) -> SweepReport:
        """Archive, clean and delete finished runs (rules in ``store.sweep``), in one
        transaction, one sweeper at a time (``store.postgres_sweep``). ``dry_run``: what it
        would do, nothing written."""
        return sweep_runs(
            self._tx,
            self.path,
            now=now,
            archive_after_minutes=archive_after_minutes,
            cleanup_default=cleanup_default,
            retention_days=retention_days,
            dry_run=dry_run,
        )

    def login(self) -> Login:
        """How this store logged in (its password, if the server asked for one) and the
        logins a run's command could attempt (``store.postgres_login``)."""
        with self._tx.lock:
            try:
                return login_of(self._tx.connection())
            except Exception as exc:  # psycopg's: this module imports it lazily
                raise StoreError(f"{self.where}: listing the roles that may log in: {exc}") from exc

    def meta(self) -> dict[str, str]:
        """The store's meta table (application, schema_version)."""
        rows = self._tx.read("SELECT key, value FROM meta", (), "reading the meta table")
        return {str(k): str(v) for k, v in rows}

    def close(self) -> None:
        """Close the connection (rolling back an unfinished batch). Idempotent."""
        self._tx.close()

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"PostgresStore({self.where!r}, schema_version={SCHEMA_VERSION})"
