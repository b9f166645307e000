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

Thread model: one connection, guarded by one reentrant lock (hence
``check_same_thread=False``). The supervisor thread is the one writer; other threads read.
A batch holds the lock from its first statement to its commit, so another thread's reads wait
for it (for the time of a few inserts) and never see half a batch, exactly as with the
in-memory store; reads from the writer's own thread inside a batch see its uncommitted
writes. Other processes open their own ``SQLiteStore`` on the same path; SQLite's locks
serialise them with this one.

Atomicity: a batch is one transaction (``BEGIN IMMEDIATE``, so the write lock is taken up
front and a commit never fails for a lock a reader upgraded). A nested batch is a savepoint
inside it: it commits with the outer batch, and an exception leaving it undoes only its own
writes. Any exception leaving the outer batch rolls back everything in it. If a write fails
inside a batch (a full disk, say) and the caller catches the error, the batch is aborted:
later writes in it raise, and its exit rolls back and raises, so no partial batch is ever
committed.
"""

from __future__ import annotations

import contextlib
import functools
import sqlite3
import threading
import time
from collections.abc import Collection, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, Literal, TypeVar

import msgspec
import structlog
import tenacity

from subagents.messages import (
    TERMINAL_STATUSES,
    Checkpoint,
    CheckpointDelta,
    Command,
    Event,
    JournalEntry,
    Lease,
    Mail,
    MailState,
    Outcome,
    RunRecord,
    RunStatus,
)
from subagents.store.base import StoreError
from subagents.store.dbfile import check_header, prepare_file
from subagents.store.deferred import DeferredWrites, FailedWrite
from subagents.store.errors import SQLITE_BUSY, SQLITE_LOCKED, primary_code, translate
from subagents.store.migrations import SCHEMA_VERSION, inspect_version, upgrade
from subagents.store.paths import default_store_path, host_log
from subagents.store.schema import read_meta
from subagents.store.sweep import (
    Cleanup,
    SweepCandidate,
    SweepReport,
    plan_sweep,
    sweep_bounds,
)

log = structlog.get_logger("subagents.store")

T = TypeVar("T")

COMMAND_KINDS = ("stop", "send")
_TERMINAL = tuple(sorted(s.value for s in TERMINAL_STATUSES))

_encoder = msgspec.json.Encoder()
_run_decoder = msgspec.json.Decoder(RunRecord)
_event_decoder = msgspec.json.Decoder(Event)
_checkpoint_decoder = msgspec.json.Decoder(Checkpoint)
_delta_decoder = msgspec.json.Decoder(CheckpointDelta)
_mail_decoder = msgspec.json.Decoder(Mail)
_outcome_decoder = msgspec.json.Decoder(Outcome)
_journal_decoder = msgspec.json.Decoder(list[JournalEntry])
_lease_decoder = msgspec.json.Decoder(Lease)


_SAVE_RUN = f"""INSERT INTO runs (run_id, agent, status, root_run_id, parent_run_id, depth,
        created_at, ended_at, cleanup, record)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (run_id) DO UPDATE SET
        agent = excluded.agent, status = excluded.status, root_run_id = excluded.root_run_id,
        parent_run_id = excluded.parent_run_id, depth = excluded.depth,
        created_at = excluded.created_at, ended_at = excluded.ended_at,
        cleanup = excluded.cleanup, record = excluded.record,
        archived_at = CASE WHEN excluded.status IN ({", ".join("?" * len(_TERMINAL))})
                      THEN archived_at ELSE NULL END"""
"""Upsert of a run; a run saved again with a live status (a restart) is no longer archived."""

_SAVE_MAIL = """INSERT INTO mail (mail_id, sender, recipient, state, sent_at, mail)
    VALUES (?, ?, ?, ?, ?, ?)
    ON CONFLICT (mail_id) DO UPDATE SET sender = excluded.sender,
        recipient = excluded.recipient, state = excluded.state,
        sent_at = excluded.sent_at, mail = excluded.mail"""

_SET_MAIL_STATE = "UPDATE mail SET state = ?, mail = json_set(mail, '$.state', ?) WHERE mail_id = ?"
"""A mail's new state in its column and its document, without reading it (JSON1)."""


_STATE_CHUNK = 500
"""Ids per ``set_mails_state`` statement (SQLite before 3.32 allows 999 parameters)."""


@functools.cache
def _set_mails_state_sql(n: int) -> str:
    """``_SET_MAIL_STATE`` for ``n`` mails at once."""
    return (
        "UPDATE mail SET state = ?, mail = json_set(mail, '$.state', ?)"
        f" WHERE mail_id IN ({_marks(n)})"
    )


def _has_json1(conn: sqlite3.Connection) -> bool:
    """Whether this SQLite has the JSON functions (built in since 3.38, optional before)."""
    try:
        conn.execute("SELECT json_set('{}', '$.a', 1)").fetchone()
    except sqlite3.OperationalError:
        return False
    return True


def _encode(obj: Any, decoder: msgspec.json.Decoder[Any], what: str) -> str:
    """``obj`` as JSON text, checked to read back.

    JSON has no NaN or infinity: msgspec writes them as ``null``, which a float field then
    refuses to read. A record that would be written fine and never read again is refused
    here instead, with its name, before anything is written.
    """
    try:
        raw = _encoder.encode(obj)
        decoder.decode(raw)
    except (TypeError, msgspec.EncodeError, msgspec.ValidationError) as exc:
        raise ValueError(
            f"cannot store {what}: {exc} (NaN and infinite numbers cannot be stored)"
            if isinstance(exc, msgspec.ValidationError)
            else f"cannot store {what}: {exc}"
        ) from exc
    return raw.decode("utf-8")


def _is_busy(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and primary_code(exc) in (
        SQLITE_BUSY,
        SQLITE_LOCKED,
    )


def _switch_to_wal(conn: sqlite3.Connection, busy_timeout: float) -> str:
    """Put the file in WAL mode (a no-op once it is); return the journal mode now in force.

    The switch needs an exclusive lock and SQLite does not wait for it with the busy
    handler: when several processes open a new store at once, all but one get
    SQLITE_BUSY. So it is retried, with backoff, for up to the busy timeout.
    """
    (mode,) = conn.execute("PRAGMA journal_mode").fetchone()
    if str(mode).lower() == "wal":
        return "wal"
    for attempt in tenacity.Retrying(
        retry=tenacity.retry_if_exception(_is_busy),
        wait=tenacity.wait_exponential(multiplier=0.002, max=0.1),
        stop=tenacity.stop_after_delay(max(busy_timeout, 0.1)),
        reraise=True,
    ):
        with attempt:
            (mode,) = conn.execute("PRAGMA journal_mode = WAL").fetchone()
    return str(mode).lower()


def _marks(n: int) -> str:
    return ", ".join("?" * n)


def _mail_row(mail: Mail) -> tuple[Any, ...]:
    """The parameters of ``_SAVE_MAIL`` for ``mail``."""
    return (
        mail.mail_id,
        mail.sender,
        mail.recipient,
        mail.state.value,
        mail.sent_at,
        _encode(mail, _mail_decoder, f"mail {mail.mail_id}"),
    )


class _Batch:
    """``SQLiteStore.batch()``: enter and exit call the store; ``mark`` is set when nested."""

    __slots__ = ("mark", "name", "store")

    def __init__(self, store: SQLiteStore) -> None:
        self.store = store
        self.mark: tuple[int, int] | None = None
        self.name = ""

    def __enter__(self) -> None:
        self.store._enter_batch(self)

    def __exit__(self, kind: object, exc: object, tb: object) -> Literal[False]:
        self.store._exit_batch(self, kind is not None)
        return False


class SQLiteStore:
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
        self._lock = threading.RLock()
        self._depth = 0
        self._failed: StoreError | None = None
        self._doomed = False
        """A held write failed: the whole batch is lost, not just a nested one."""
        self._held = DeferredWrites()
        self._closed = False
        prepare_file(self.path)
        check_header(self.path)
        try:
            conn = sqlite3.connect(
                self.path,
                timeout=busy_timeout,
                isolation_level=None,
                check_same_thread=False,
            )
        except sqlite3.Error as exc:
            raise translate(exc, self.path, "opening the store") from exc
        try:
            self.found_version, self.schema_version = self._open(conn, busy_timeout, max_bytes)
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        self._json1 = _has_json1(conn)
        log.debug("store.opened", path=str(self.path), schema_version=self.schema_version)

    def _open(
        self, conn: sqlite3.Connection, busy_timeout: float, max_bytes: int | None
    ) -> tuple[int | None, int]:
        doing = "opening the store"
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
            # Read first, write nothing: a foreign or newer file is refused untouched
            # (switching to WAL would already rewrite its header).
            doing = "reading the schema"
            inspect_version(conn, self.path)
            doing = "switching to WAL mode"
            mode = _switch_to_wal(conn, busy_timeout)
            if str(mode).lower() != "wal":
                raise StoreError(
                    f"{self.path}: cannot use WAL mode (journal mode stays {mode!r}); the "
                    f"store needs a local file system that supports shared memory"
                )
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA foreign_keys = ON")
            doing = "creating or upgrading the schema"
            found, version = upgrade(conn, self.path)
            if max_bytes is not None:
                (page_size,) = conn.execute("PRAGMA page_size").fetchone()
                conn.execute(f"PRAGMA max_page_count = {max(1, max_bytes // int(page_size))}")
        except sqlite3.Error as exc:
            raise translate(exc, self.path, doing) from exc
        if found is not None and found != version:
            log.info("store.upgraded", path=str(self.path), from_version=found, to_version=version)
        return found, version

    # -----------------------------------------------------------------------------------------
    # transactions
    # -----------------------------------------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        if self._closed:
            raise StoreError(f"{self.path}: the store is closed")
        return self._conn

    def batch(self) -> AbstractContextManager[None]:
        """Group the writes made inside into one transaction, committed at exit.

        A class rather than a generator context manager: the supervisor opens one (nested in
        its group commit) per message it handles, so its cost counts per mail."""
        return _Batch(self)

    def _enter_batch(self, batch: _Batch) -> None:
        self._lock.acquire()
        try:
            conn = self._connection()
            if self._depth > 0:
                self._enter_savepoint(batch)
                return
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise translate(exc, self.path, "starting a batch") from exc
            self._failed = None
            self._doomed = False
            self._held.clear()
            self._depth = 1
        except BaseException:
            self._lock.release()
            raise

    def _exit_batch(self, batch: _Batch, failed: bool) -> None:
        try:
            if batch.mark is not None:
                self._exit_savepoint(batch, failed)
            else:
                self._end(self._conn, commit=not failed)
        finally:
            self._lock.release()

    def _end(self, conn: sqlite3.Connection, *, commit: bool) -> None:
        if commit and self._held and self._failed is None:
            with contextlib.suppress(StoreError):  # it is in self._failed: reported below
                self._send_held(conn)
        self._held.clear()
        self._depth = 0
        failed, self._failed = self._failed, None
        if commit and failed is not None:
            self._rollback(conn)
            raise StoreError(
                f"{self.path}: batch rolled back: a write in it failed ({failed})"
            ) from failed
        if commit:
            try:
                conn.execute("COMMIT")
                return
            except sqlite3.Error as exc:
                self._rollback(conn)
                raise translate(exc, self.path, "committing a batch") from exc
        self._rollback(conn)

    def _rollback(self, conn: sqlite3.Connection) -> None:
        if conn.in_transaction:
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error as exc:  # the connection is unusable; say so, keep going
                log.error("store.rollback_failed", path=str(self.path), error=str(exc))

    def _enter_savepoint(self, batch: _Batch) -> None:
        """A nested batch. Its SAVEPOINT is held like a write: if nothing was sent to SQLite
        while it was open (the common case: the supervisor nests one per message), ending
        it costs no statement at all, and failing it just forgets its held writes."""
        if self._failed is not None:
            raise self._aborted("starting a nested batch")
        batch.name = f"batch_{self._depth}"
        batch.mark = self._held.mark(f"SAVEPOINT {batch.name}", "starting a nested batch")
        self._depth += 1

    def _exit_savepoint(self, batch: _Batch, failed: bool) -> None:
        assert batch.mark is not None
        self._depth -= 1
        sent = self._held.sent_since(batch.mark)
        if not failed:
            if sent:
                self._held.mark(f"RELEASE {batch.name}", "ending a nested batch")
            else:
                self._held.void(batch.mark)
            return
        if not sent:  # nothing of it reached SQLite (so no write of it failed there)
            self._held.drop(batch.mark)
            return
        self._held.clear()  # everything still held was written inside this savepoint
        conn = self._conn
        if conn.in_transaction:
            try:
                conn.execute(f"ROLLBACK TO {batch.name}")
                conn.execute(f"RELEASE {batch.name}")
                if not self._doomed:
                    self._failed = None  # its failed writes are undone
            except sqlite3.Error as exc:
                self._failed = translate(exc, self.path, "undoing a nested batch")

    def _aborted(self, doing: str) -> StoreError:
        return StoreError(
            f"{self.path}: {doing}: the batch was aborted by an earlier failed write "
            f"({self._failed or 'the transaction was rolled back'})"
        )

    def _send_held(self, conn: sqlite3.Connection) -> None:
        """Send the held writes of the open batch (before a read, a direct write, a commit).
        A failure aborts the whole batch, whichever nested batch made the write."""
        if self._failed is not None or not conn.in_transaction:
            first = next((e for e in self._held.items if e is not None), None)
            self._held.clear()
            raise self._aborted(first[3] if first is not None else "sending held writes")
        try:
            self._held.flush(conn)
        except FailedWrite as exc:
            error = translate(exc.error, self.path, exc.doing)
            self._failed, self._doomed = error, True
            raise error from exc.error

    def _defer(self, table: str, sql: str, params: tuple[Any, ...], doing: str) -> None:
        """A write whose result nobody needs: held until the open batch sends it (see
        ``store.deferred``); outside a batch, written and committed at once."""
        with self._lock:
            if self._depth == 0:
                with self._writing() as conn:
                    self._write_sql(conn, sql, params, doing)
                return
            if self._failed is not None:
                raise self._aborted(doing)
            self._held.add(table, sql, params, doing)

    def _defer_rows(self, table: str, sql: str, rows: list[tuple[Any, ...]], doing: str) -> None:
        """``_defer`` of several rows of one statement, held as one entry; ``doing`` names
        the first row (the error of a failed ``executemany`` names the first and the count)."""
        if not rows:
            return
        with self._lock:
            if self._depth == 0:
                with self._writing() as conn:  # one transaction for all of them
                    if self._held:
                        self._send_held(conn)
                    try:
                        conn.executemany(sql, rows)
                    except sqlite3.Error as exc:
                        error = translate(exc, self.path, f"{doing} ({len(rows)} rows)")
                        self._failed = error
                        raise error from exc
                return
            if self._failed is not None:
                raise self._aborted(doing)
            self._held.add_rows(table, sql, rows, doing)

    @contextmanager
    def _writing(self) -> Iterator[sqlite3.Connection]:
        """A transaction for one write method: the open batch, or a batch of its own."""
        with self._lock:
            if self._depth > 0:
                yield self._connection()
            else:
                with self.batch():
                    yield self._connection()

    def _write_sql(
        self, conn: sqlite3.Connection, sql: str, params: Iterable[Any], doing: str
    ) -> sqlite3.Cursor:
        if self._held:
            self._send_held(conn)
        if self._failed is not None or (self._depth > 0 and not conn.in_transaction):
            raise self._aborted(doing)
        try:
            return conn.execute(sql, tuple(params))
        except sqlite3.Error as exc:
            error = translate(exc, self.path, doing)
            if self._depth > 0:
                self._failed = error
            raise error from exc

    def _read(self, sql: str, params: Iterable[Any], doing: str) -> list[Any]:
        with self._lock:
            conn = self._connection()
            if self._held:  # only the batch's own thread gets here while it is open
                self._send_held(conn)
            try:
                return conn.execute(sql, tuple(params)).fetchall()
            except sqlite3.Error as exc:
                raise translate(exc, self.path, doing) from exc

    def _decode(self, decoder: msgspec.json.Decoder[T], raw: str, table: str, key: object) -> T:
        try:
            return decoder.decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise StoreError(f"{self.path}: cannot read {table} row {key!r}: {exc}") from exc

    # -----------------------------------------------------------------------------------------
    # runs and transitions
    # -----------------------------------------------------------------------------------------

    def save_run(self, record: RunRecord) -> None:
        self._defer(
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
                _encode(record, _run_decoder, f"run {record.run_id}"),
                *_TERMINAL,
            ),
            f"saving run {record.run_id}",
        )

    def get_run(self, run_id: str) -> RunRecord | None:
        rows = self._read(
            "SELECT record FROM runs WHERE run_id = ?", (run_id,), f"reading run {run_id}"
        )
        return self._decode(_run_decoder, rows[0][0], "runs", run_id) if rows else None

    def list_runs(
        self,
        *,
        statuses: Iterable[RunStatus] | None = None,
        root_run_id: str | None = None,
        agent: str | None = None,
        limit: int | None = None,
        include_archived: bool = False,
    ) -> list[RunRecord]:
        """Runs in creation order, filtered; archived runs only with ``include_archived``."""
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
        sql = "SELECT run_id, record FROM runs"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY created_at, run_id"
        if limit is not None and limit >= 0:
            sql += " LIMIT ?"
            params.append(limit)
        rows = self._read(sql, params, "listing runs")
        records = [self._decode(_run_decoder, raw, "runs", key) for key, raw in rows]
        return records[:limit] if limit is not None and limit < 0 else records

    def append_event(self, event: Event) -> None:
        kind = event.kind.value
        self._defer(
            "events",
            "INSERT INTO events (run_id, kind, ts, event) VALUES (?, ?, ?, ?)",
            (
                event.run_id,
                kind,
                event.ts,
                _encode(event, _event_decoder, f"an event of run {event.run_id}"),
            ),
            f"appending a {kind} event of run {event.run_id}",
        )

    def events(self, run_id: str) -> list[Event]:
        rows = self._read(
            "SELECT seq, event FROM events WHERE run_id = ? ORDER BY seq",
            (run_id,),
            f"reading the events of run {run_id}",
        )
        return [self._decode(_event_decoder, raw, "events", seq) for seq, raw in rows]

    # -----------------------------------------------------------------------------------------
    # conversation checkpoints
    # -----------------------------------------------------------------------------------------

    def save_checkpoint(self, checkpoint: Checkpoint) -> None:
        with self._writing() as conn:
            self._write_sql(
                conn,
                """INSERT INTO checkpoints (run_id, step, ts, checkpoint) VALUES (?, ?, ?, ?)
                   ON CONFLICT (run_id) DO UPDATE SET step = excluded.step, ts = excluded.ts,
                       checkpoint = excluded.checkpoint""",
                (
                    checkpoint.run_id,
                    checkpoint.step,
                    checkpoint.ts,
                    _encode(
                        checkpoint,
                        _checkpoint_decoder,
                        f"the checkpoint of run {checkpoint.run_id}",
                    ),
                ),
                f"saving the step {checkpoint.step} checkpoint of run {checkpoint.run_id}",
            )
            # the checkpoint holds every change made before it (the supervisor's copy)
            self._write_sql(
                conn,
                "DELETE FROM checkpoint_deltas WHERE run_id = ?",
                (checkpoint.run_id,),
                f"dropping the checkpoint deltas of run {checkpoint.run_id}",
            )

    def add_to_checkpoint(self, delta: CheckpointDelta) -> None:
        self._defer(
            "checkpoint_deltas",
            "INSERT INTO checkpoint_deltas (run_id, delta) VALUES (?, ?)",
            (
                delta.run_id,
                _encode(delta, _delta_decoder, f"a checkpoint delta of run {delta.run_id}"),
            ),
            f"adding to the step {delta.step} checkpoint of run {delta.run_id}",
        )

    def load_checkpoint(self, run_id: str) -> Checkpoint | None:
        rows = self._read(
            "SELECT checkpoint FROM checkpoints WHERE run_id = ?",
            (run_id,),
            f"reading the checkpoint of run {run_id}",
        )
        if not rows:
            return None
        checkpoint: Checkpoint = self._decode(
            _checkpoint_decoder, rows[0][0], "checkpoints", run_id
        )
        deltas = self._read(
            "SELECT seq, delta FROM checkpoint_deltas WHERE run_id = ? ORDER BY seq",
            (run_id,),
            f"reading the checkpoint deltas of run {run_id}",
        )
        for seq, raw in deltas:
            delta: CheckpointDelta = self._decode(_delta_decoder, raw, "checkpoint_deltas", seq)
            checkpoint = checkpoint.with_delta(delta)
        return checkpoint

    # -----------------------------------------------------------------------------------------
    # mail
    # -----------------------------------------------------------------------------------------

    def save_mail(self, mail: Mail) -> None:
        self._defer("mail", _SAVE_MAIL, _mail_row(mail), f"saving mail {mail.mail_id}")

    def save_mails(self, mails: Sequence[Mail]) -> None:
        if not mails:
            return
        # every row encoded before any is held: a mail that cannot be stored holds none
        rows = [_mail_row(mail) for mail in mails]
        self._defer_rows("mail", _SAVE_MAIL, rows, f"saving mail {mails[0].mail_id}")

    def set_mails_state(self, mail_ids: Sequence[str], state: MailState) -> None:
        state = MailState(state)
        if not self._json1:
            for mail_id in mail_ids:
                self.set_mail_state(mail_id, state)
            return
        # one UPDATE per chunk of ids (``mail_id IN (...)``), not one row each: a statement
        # per chunk costs SQLite ~20% less than executemany's step per id, and Python no
        # params tuple per id
        value = state.value
        for start in range(0, len(mail_ids), _STATE_CHUNK):
            chunk = mail_ids[start : start + _STATE_CHUNK]
            self._defer(
                "mail",
                _set_mails_state_sql(len(chunk)),
                (value, value, *chunk),
                f"setting mail {chunk[0]} to {value}"
                + (f" (and {len(chunk) - 1} more)" if len(chunk) > 1 else ""),
            )

    def set_mail_state(self, mail_id: str, state: MailState) -> None:
        state = MailState(state)
        if self._json1:  # one statement; the column and the document stay in step
            self._defer(
                "mail",
                _SET_MAIL_STATE,
                (state.value, state.value, mail_id),
                f"setting mail {mail_id} to {state.value}",
            )
            return
        with self._writing() as conn:
            doing = f"setting mail {mail_id} to {state.value}"
            row = self._write_sql(
                conn, "SELECT mail FROM mail WHERE mail_id = ?", (mail_id,), doing
            ).fetchone()
            if row is None:
                return
            mail = msgspec.structs.replace(
                self._decode(_mail_decoder, row[0], "mail", mail_id), state=state
            )
            self._write_sql(
                conn,
                "UPDATE mail SET state = ?, mail = ? WHERE mail_id = ?",
                (state.value, _encode(mail, _mail_decoder, f"mail {mail_id}"), mail_id),
                doing,
            )

    def mail_for(self, run_id: str, states: Iterable[MailState] | None = None) -> list[Mail]:
        sql = "SELECT mail_id, mail FROM mail WHERE (recipient = ? OR sender = ?)"
        params: list[Any] = [run_id, run_id]
        if states is not None:
            wanted = sorted({MailState(s).value for s in states})
            if not wanted:
                return []
            sql += f" AND state IN ({_marks(len(wanted))})"
            params.extend(wanted)
        rows = self._read(sql + " ORDER BY seq", params, f"reading the mail of run {run_id}")
        return [self._decode(_mail_decoder, raw, "mail", key) for key, raw in rows]

    # -----------------------------------------------------------------------------------------
    # function agents' journals
    # -----------------------------------------------------------------------------------------

    def save_journal(self, run_id: str, entries: Sequence[JournalEntry]) -> None:
        if not entries:
            return
        self._defer(
            "journal",
            "INSERT INTO journal (run_id, entries) VALUES (?, ?)",
            # made by the runtime (ids, digests, finite numbers): no read-back check needed
            (run_id, _encoder.encode(list(entries)).decode("utf-8")),
            f"appending to the journal of run {run_id}",
        )

    def journal_of(self, run_id: str) -> list[JournalEntry]:
        rows = self._read(
            "SELECT seq, entries FROM journal WHERE run_id = ? ORDER BY seq",
            (run_id,),
            f"reading the journal of run {run_id}",
        )
        entries: list[JournalEntry] = []
        for seq, raw in rows:
            decoded: list[JournalEntry] = self._decode(_journal_decoder, raw, "journal", seq)
            entries.extend(decoded)
        return entries

    # -----------------------------------------------------------------------------------------
    # outcomes and their delivery to the requester
    # -----------------------------------------------------------------------------------------

    def save_outcome(self, outcome: Outcome) -> None:
        self._defer(
            "outcomes",
            """INSERT INTO outcomes (run_id, status, delivered, outcome) VALUES (?, ?, 0, ?)
               ON CONFLICT (run_id) DO UPDATE SET status = excluded.status,
                   delivered = 0, outcome = excluded.outcome""",
            (
                outcome.run_id,
                outcome.status.value,
                _encode(outcome, _outcome_decoder, f"the outcome of run {outcome.run_id}"),
            ),
            f"saving the outcome of run {outcome.run_id}",
        )

    def mark_outcome_delivered(self, run_id: str) -> None:
        self._defer(
            "outcomes",
            "UPDATE outcomes SET delivered = 1 WHERE run_id = ?",
            (run_id,),
            f"marking the outcome of run {run_id} delivered",
        )

    def undelivered_outcomes(self) -> list[Outcome]:
        rows = self._read(
            "SELECT run_id, outcome FROM outcomes WHERE delivered = 0 ORDER BY seq",
            (),
            "reading undelivered outcomes",
        )
        return [self._decode(_outcome_decoder, raw, "outcomes", key) for key, raw in rows]

    # -----------------------------------------------------------------------------------------
    # commands from other processes
    # -----------------------------------------------------------------------------------------

    def post_command(self, kind: str, run_id: str, content: str | None = None) -> int:
        """Queue a command for the runtime that owns ``run_id``; safe from any process."""
        if kind not in COMMAND_KINDS:
            raise ValueError(f"unknown command kind {kind!r}: expected 'stop' or 'send'")
        with self._writing() as conn:
            cursor = self._write_sql(
                conn,
                "INSERT INTO commands (kind, run_id, content, ts) VALUES (?, ?, ?, ?)",
                (kind, run_id, content, time.time()),
                f"posting a {kind} command for run {run_id}",
            )
            command_id = cursor.lastrowid
        assert command_id is not None
        return command_id

    def take_commands(self, run_ids: Collection[str] | None = None) -> list[Command]:
        """Claim pending commands, oldest first; each is returned to exactly one taker.

        With ``run_ids``, only commands for those runs are claimed: a runtime takes the
        commands of the runs it hosts and leaves the others to their own process.

        Called inside a batch, the claim commits (or rolls back) with the writes that act
        on the commands, so a crash between taking and acting loses no command. Outside a
        batch, polling an empty queue only reads: it never waits for another process's
        write lock.
        """
        doing = "taking commands"
        with self._lock:
            if self._depth == 0 and not self._read(
                "SELECT 1 FROM commands WHERE taken_at IS NULL LIMIT 1", (), doing
            ):
                return []  # the common case, without taking the write lock
        with self._writing() as conn:
            rows = self._write_sql(
                conn,
                "SELECT command_id, kind, run_id, content, ts FROM commands "
                "WHERE taken_at IS NULL ORDER BY command_id",
                (),
                doing,
            ).fetchall()
            if run_ids is not None:
                rows = [row for row in rows if row[2] in run_ids]
            if rows:
                self._write_sql(
                    conn,
                    f"UPDATE commands SET taken_at = ? WHERE command_id IN ({_marks(len(rows))})",
                    (time.time(), *(row[0] for row in rows)),
                    doing,
                )
        return [
            Command(command_id=cid, kind=kind, run_id=run_id, content=content, ts=ts)
            for cid, kind, run_id, content, ts in rows
        ]

    # -----------------------------------------------------------------------------------------
    # leases: which runtimes are alive
    # -----------------------------------------------------------------------------------------

    def _lease_row(self, lease: Lease) -> tuple[Any, ...]:
        return (
            lease.owner,
            lease.host,
            lease.pid,
            lease.renewed_at,
            lease.expires_at,
            _encode(lease, _lease_decoder, f"the lease of {lease.owner}"),
        )

    def acquire_lease(self, lease: Lease) -> None:
        with self._writing() as conn:
            self._write_sql(
                conn,
                """INSERT INTO leases (owner, host, pid, renewed_at, expires_at, lease)
                   VALUES (?, ?, ?, ?, ?, ?)
                   ON CONFLICT (owner) DO UPDATE SET host = excluded.host, pid = excluded.pid,
                       renewed_at = excluded.renewed_at, expires_at = excluded.expires_at,
                       lease = excluded.lease""",
                self._lease_row(lease),
                f"writing the lease of {lease.owner}",
            )

    def renew_lease(self, lease: Lease) -> bool:
        row = self._lease_row(lease)
        with self._writing() as conn:
            cursor = self._write_sql(
                conn,
                """UPDATE leases SET host = ?, pid = ?, renewed_at = ?, expires_at = ?, lease = ?
                   WHERE owner = ?""",
                (*row[1:], lease.owner),
                f"renewing the lease of {lease.owner}",
            )
            return cursor.rowcount > 0

    def release_lease(self, owner: str) -> None:
        with self._writing() as conn:
            self._write_sql(
                conn, "DELETE FROM leases WHERE owner = ?", (owner,), f"releasing lease {owner}"
            )

    def leases(self) -> list[Lease]:
        rows = self._read("SELECT owner, lease FROM leases ORDER BY owner", (), "reading leases")
        return [self._decode(_lease_decoder, raw, "leases", key) for key, raw in rows]

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
    ) -> SweepReport:
        """Archive, clean and delete finished runs (rules in ``store.sweep``), in one batch.

        Also purges commands taken before the archive bound.
        """
        bounds = sweep_bounds(
            now=now, archive_after_minutes=archive_after_minutes, retention_days=retention_days
        )
        terminal = _marks(len(_TERMINAL))
        with self._writing() as conn:
            doing = "sweeping"
            rows = self._write_sql(
                conn,
                f"""SELECT r.run_id, r.status, r.created_at, r.ended_at, r.archived_at,
                        r.cleanup, COALESCE(o.delivered = 0, 0)
                    FROM runs r LEFT JOIN outcomes o ON o.run_id = r.run_id
                    WHERE r.status IN ({terminal}) AND (
                        (r.archived_at IS NULL AND COALESCE(r.ended_at, r.created_at) <= ?)
                        OR (r.archived_at IS NOT NULL AND r.archived_at <= ?))
                    ORDER BY r.created_at, r.run_id""",
                (
                    *_TERMINAL,
                    bounds.archive_before,
                    bounds.delete_before if bounds.delete_before is not None else float("-inf"),
                ),
                doing,
            ).fetchall()
            candidates = [
                SweepCandidate(
                    run_id=run_id,
                    status=RunStatus(status),
                    created_at=created_at,
                    ended_at=ended_at,
                    archived_at=archived_at,
                    cleanup=cleanup,
                    outcome_undelivered=bool(undelivered),
                )
                for run_id, status, created_at, ended_at, archived_at, cleanup, undelivered in rows
            ]
            plan = plan_sweep(
                candidates,
                now=now,
                archive_after_minutes=archive_after_minutes,
                cleanup_default=cleanup_default,
                retention_days=retention_days,
            )
            for run_id in plan.archive:
                self._write_sql(
                    conn, "UPDATE runs SET archived_at = ? WHERE run_id = ?", (now, run_id), doing
                )
            for run_id in plan.clean:
                for table in ("events", "checkpoints", "checkpoint_deltas", "journal"):
                    self._write_sql(conn, f"DELETE FROM {table} WHERE run_id = ?", (run_id,), doing)
            for run_id in plan.delete:
                for table in (
                    "events", "checkpoints", "checkpoint_deltas", "journal", "outcomes",
                    "commands", "runs",
                ):  # fmt: skip
                    self._write_sql(conn, f"DELETE FROM {table} WHERE run_id = ?", (run_id,), doing)
                self._write_sql(
                    conn,
                    "DELETE FROM mail WHERE sender = ? OR recipient = ?",
                    (run_id, run_id),
                    doing,
                )
            purged = self._write_sql(
                conn,
                "DELETE FROM commands WHERE taken_at IS NOT NULL AND taken_at <= ?",
                (bounds.archive_before,),
                doing,
            ).rowcount
        # a detached tree's host log goes with the transcript it printed (after the commit:
        # a rolled back sweep deletes nothing)
        for run_id in dict.fromkeys((*plan.clean, *plan.delete)):
            with contextlib.suppress(OSError):
                host_log(self.path, run_id).unlink()
        report = SweepReport(
            archived=plan.archive,
            cleaned=plan.clean,
            deleted=plan.delete,
            held=plan.held,
            commands_purged=max(0, purged),
        )
        if plan.archive or plan.delete or plan.held or purged:
            log.info(
                "store.swept",
                path=str(self.path),
                archived=len(plan.archive),
                cleaned=len(plan.clean),
                deleted=len(plan.delete),
                held=len(plan.held),
                commands_purged=report.commands_purged,
            )
        return report

    # -----------------------------------------------------------------------------------------
    # housekeeping
    # -----------------------------------------------------------------------------------------

    def verify(self) -> None:
        """Check every page of the file (``PRAGMA quick_check``); StoreError if damaged.

        Opening the store checks only the header and the schema, so that opening stays cheap
        for a large store; call this when a full check is worth its time.
        """
        rows = self._read("PRAGMA quick_check", (), "checking the database")
        problems = [str(r[0]) for r in rows]
        if problems != ["ok"]:
            shown = "; ".join(problems[:5])
            raise StoreError(f"{self.path}: corrupt database: {shown}")

    def meta(self) -> dict[str, str]:
        """The store's meta table (application, schema_version)."""
        with self._lock:
            conn = self._connection()
            try:
                return read_meta(conn)
            except sqlite3.Error as exc:
                raise translate(exc, self.path, "reading the meta table") from exc

    def close(self) -> None:
        """Close the connection (rolling back an unfinished batch). Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._held.clear()
            self._rollback(self._conn)
            self._conn.close()

    def __enter__(self) -> SQLiteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SQLiteStore({str(self.path)!r}, schema_version={SCHEMA_VERSION})"
