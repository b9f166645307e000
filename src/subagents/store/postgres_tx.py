"""Transactions of the PostgreSQL store: its connection, batches, savepoints, held writes.

The same model as SQLite's (``store.sqlite_tx``), so the store keeps the same promises:

- One connection per store, guarded by one reentrant lock. The supervisor's thread is the
  one writer of its runtime; other threads read, waiting for a batch in progress (they never
  see half of one). Other processes (other runtimes, ``subagents ps``) have their own
  connections; PostgreSQL's row locks and the fence (``store.postgres_processes``) keep them
  apart.
- A batch is one transaction; a nested batch is a savepoint; an exception leaving the outer
  batch rolls back everything, and a write that failed inside a batch dooms it (its exit
  rolls back and raises), so no partial batch is ever committed.
- Small writes are held and sent together, at the commit or before anything in the batch
  reads or writes directly, through libpq's pipeline: ``BEGIN``, the held writes and
  ``COMMIT`` go in one round trip to the server instead of one each. A savepoint that
  nothing was sent inside costs no statement.

What the network adds: the connection may be lost (the server restarted, a partition).
A failure then is a ``StoreError`` saying the database is unreachable; a commit whose
answer was lost (the connection gone with the ``COMMIT`` sent) is an ``UnsureWrite``: it may
or may not have been committed, and the runtime reads the store before telling what it
decided in it (``actors.outage``). A transaction whose connection the server ended before
its ``COMMIT`` was sent committed nothing, and the rest of it is never sent on a new
connection (it would be written there without its ``BEGIN``, statement by statement).
The next call outside a batch connects again, so a runtime whose store failed
(``actors.outage``) goes on once the database is back. TCP keepalives and
``idle_in_transaction_session_timeout`` make the server end the transactions of a host that
vanished or stalled, so its locks do not hold every other runtime up.
"""

from __future__ import annotations

import select
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Literal, TypeVar

import msgspec
import psycopg
from psycopg import errors as pg_errors

from subagents.logs import get_logger
from subagents.store.base import AlreadyEnded, DamagedRow, StoreError, UnsureWrite
from subagents.store.errors import OLDER_PROCESS_STOP
from subagents.store.locations import redacted
from subagents.store.lone_surrogates import escaped, refused
from subagents.store.postgres_schema import SCHEMA, SECOND_END

log = get_logger("subagents.store")

T = TypeVar("T")

PgParams = Sequence[Any] | Mapping[str, Any]
Held = tuple[str, PgParams | list[PgParams], str]
"""(sql; the params of one row, or a list of rows; what it does, for an error)."""

SESSION = (
    f"SET search_path TO {SCHEMA}",
    "SET idle_in_transaction_session_timeout = '60s'",
    "SET lock_timeout = '30s'",
)
"""Every connection's settings: the store's schema; a transaction left idle a minute (a
host stalled mid-batch) is ended by the server, releasing its locks; no lock waited for
longer than 30 s (a stuck one becomes an error naming what waited)."""

CONNECT: dict[str, Any] = {
    "connect_timeout": 10,
    "application_name": "subagents",
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 3,
}
"""libpq parameters beside the URL's: a lost server is noticed in about 25 s, not hours."""


def translate(exc: psycopg.Error, where: str, doing: str) -> StoreError:
    """A StoreError for ``exc``, raised while ``doing`` something to the store ``where``."""
    detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if getattr(exc, "sqlstate", None) == SECOND_END:  # (the server's trigger: one end a run)
        key = getattr(getattr(exc, "diag", None), "message_detail", None)
        said = detail.replace(OLDER_PROCESS_STOP, "")  # (for a process that knows it not)
        return AlreadyEnded(f"{where}: {doing}: {said}", key)
    if isinstance(exc, pg_errors.DiskFull):
        reason = f"disk full: the database server could not write (postgresql: {detail})"
    elif isinstance(exc, pg_errors.LockNotAvailable):
        reason = f"waited too long for a lock another connection holds (postgresql: {detail})"
    elif isinstance(exc, pg_errors.SerializationFailure | pg_errors.DeadlockDetected):
        reason = f"a conflicting transaction (postgresql: {detail})"
    elif isinstance(exc, psycopg.OperationalError):
        reason = f"the database is unreachable (postgresql: {detail})"
    else:
        sqlstate = getattr(exc, "sqlstate", None)
        reason = f"postgresql{f' {sqlstate}' if sqlstate else ''}: {detail}"
    return StoreError(f"{where}: {doing}: {reason}")


def rolled_back(where: str, error: StoreError) -> StoreError:
    """The batch's error when a write in it failed with ``error`` and it was rolled back: of
    ``error``'s kind when that is one a caller acts on (``AlreadyEnded``)."""
    said = f"{where}: batch rolled back: a write in it failed ({error})"
    if isinstance(error, AlreadyEnded):
        return AlreadyEnded(said, error.key)
    return StoreError(said)


_BEGIN: Held = ("BEGIN", (), "starting a batch")
_CONTROL = ("BEGIN", "COMMIT", "SAVEPOINT", "RELEASE")


def _closed_by_server(conn: psycopg.Connection[Any]) -> bool:
    """Whether an idle connection was closed by the server (a restart, an administrator, the
    idle timeout): its socket is readable while nothing is asked of it (the server's goodbye,
    or the end of the stream). One ``select`` with no wait, so that the first batch after the
    database came back does not fail on a connection that died while the runtime was idle."""
    try:
        readable, _, _ = select.select([conn.fileno()], [], [], 0)
    except (OSError, ValueError, psycopg.Error):
        return True
    return bool(readable)


class PgFailedWrite(Exception):
    """Held writes failed when sent; ``doing`` names them, ``error`` is psycopg's."""

    def __init__(self, doing: str, error: psycopg.Error) -> None:
        super().__init__(doing)
        self.doing = doing
        self.error = error


class _Batch:
    """``PgTransactions.batch()``; ``mark`` is set when nested (a savepoint)."""

    __slots__ = ("mark", "name", "tx")

    def __init__(self, tx: PgTransactions) -> None:
        self.tx = tx
        self.mark: tuple[int, int] | None = None
        self.name = ""

    def __enter__(self) -> None:
        self.tx._enter_batch(self)

    def __exit__(self, kind: object, exc: object, tb: object) -> Literal[False]:
        self.tx._exit_batch(self, kind is not None)
        return False


class PgTransactions:
    """The store's connection and the transactions on it (see the module docstring)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.where = redacted(url)
        self.lock = threading.RLock()
        self._conn: psycopg.Connection[Any] | None = None
        self._depth = 0
        self._held: list[Held | None] = []
        self._flushes = 0
        self._failed: StoreError | None = None
        self._doomed = False
        self._closed = False
        self._locked: set[int] = set()
        """The advisory locks this transaction has asked for (``lock_once``)."""

    @property
    def in_batch(self) -> bool:
        return self._depth > 0

    def connect(self) -> psycopg.Connection[Any]:
        """A new connection with the session's settings (``SESSION``)."""
        try:
            conn = psycopg.connect(self.url, autocommit=True, **CONNECT)
        except psycopg.Error as exc:
            raise translate(exc, self.where, "connecting to the database") from exc
        try:
            for statement in SESSION:
                conn.execute(statement)
        except psycopg.Error as exc:
            conn.close()
            raise translate(exc, self.where, "setting up the connection") from exc
        return conn

    def connection(self) -> psycopg.Connection[Any]:
        """The open connection; outside a batch, a new one if it was lost."""
        if self._closed:
            raise StoreError(f"{self.where}: the store is closed")
        conn = self._conn
        if (
            conn is not None
            and not conn.closed
            and not conn.broken
            and (self._depth > 0 or not _closed_by_server(conn))
        ):
            return conn
        if self._depth > 0:
            raise StoreError(f"{self.where}: the connection to the database was lost mid-batch")
        if conn is not None:
            conn.close()
            log.info("store.reconnecting", url=self.where)
        self._conn = None
        self._conn = self.connect()
        return self._conn

    # ---- batches --------------------------------------------------------------------------

    def batch(self) -> AbstractContextManager[None]:
        return _Batch(self)

    def _enter_batch(self, batch: _Batch) -> None:
        self.lock.acquire()
        try:
            if self._depth > 0:
                if self._failed is not None:
                    raise self._aborted("starting a nested batch")
                batch.name = f"batch_{self._depth}"
                self._held.append((f"SAVEPOINT {batch.name}", (), "starting a nested batch"))
                batch.mark = (len(self._held) - 1, self._flushes)
                self._depth += 1
                return
            self.connection()
            self._failed = None
            self._doomed = False
            self._locked = set()
            self._held = [_BEGIN]
            self._depth = 1
        except BaseException:
            self.lock.release()
            raise

    def _exit_batch(self, batch: _Batch, failed: bool) -> None:
        try:
            if batch.mark is not None:
                self._exit_savepoint(batch, failed)
            else:
                self._end(commit=not failed)
        finally:
            self.lock.release()

    def _end(self, *, commit: bool) -> None:
        self._depth = 0
        failed, self._failed = self._failed, None
        if commit and failed is None:
            if [h for h in self._held if h is not None] == [
                _BEGIN
            ]:  # nothing was written: no transaction to commit
                self._held = []
                return
            self._held.append(("COMMIT", (), "committing a batch"))
            try:
                self._flush()
                return
            except PgFailedWrite as exc:
                conn = self._conn  # lost with the COMMIT sent: its answer is what was lost
                lost = conn is None or conn.closed or conn.broken
                self._rollback()
                error = translate(exc.error, self.where, exc.doing)
                if lost:
                    raise UnsureWrite(
                        f"{error}; the batch may or may not have been committed"
                    ) from exc.error
                raise rolled_back(self.where, error) from exc.error  # (the server answered)
            except StoreError:  # lost before the COMMIT was sent: nothing of it committed
                self._rollback()
                raise
            finally:
                self._held = []
        self._rollback()
        if commit and failed is not None:
            raise rolled_back(self.where, failed) from failed

    def _rollback(self) -> None:
        self._held = []
        conn = self._conn
        if conn is None or conn.closed or conn.broken:
            return
        if conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
            return
        try:  # psycopg's own rollback, not a ROLLBACK statement: it also forgets the
            # statements it believes prepared (DEALLOCATE ALL), and a failed pipeline leaves
            # it believing in some the server skipped (tests/store/test_store_postgres_prepared)
            conn.rollback()
        except psycopg.Error as exc:  # the connection is unusable; the next call reconnects
            log.error("store.rollback_failed", url=self.where, error=str(exc))
            conn.close()

    def _exit_savepoint(self, batch: _Batch, failed: bool) -> None:
        assert batch.mark is not None
        self._depth -= 1
        index, flushes = batch.mark
        sent = flushes != self._flushes
        if failed:
            self._locked = set()  # a lock asked for inside may be undone with it: ask again
        if not failed:
            if sent:
                self._held.append((f"RELEASE SAVEPOINT {batch.name}", (), "ending a nested batch"))
            else:
                self._held[index] = None  # it need not exist
            return
        if not sent:  # nothing of it reached the server: forget it and its writes
            del self._held[index:]
            return
        self._held = []  # whatever is still held was written inside this savepoint
        conn = self._conn
        if conn is None or conn.broken:
            return
        try:
            conn.execute(f"ROLLBACK TO SAVEPOINT {batch.name}")
            conn.execute(f"RELEASE SAVEPOINT {batch.name}")
            if not self._doomed:
                self._failed = None  # its failed writes are undone
        except psycopg.Error as exc:
            self._failed = translate(exc, self.where, "undoing a nested batch")

    def _aborted(self, doing: str) -> StoreError:
        return StoreError(
            f"{self.where}: {doing}: the batch was aborted by an earlier failed write "
            f"({self._failed or 'the transaction was rolled back'})"
        )

    # ---- sending --------------------------------------------------------------------------

    def _flush(self) -> None:
        """Send every held statement, in order, in one pipeline (one round trip); runs of
        one statement go as one ``executemany``. PgFailedWrite if any failed."""
        items = [h for h in self._held if h is not None]
        self._held = []
        if not items:
            return
        self._flushes += 1
        # a transaction begun on the connection goes on there or not at all: on a new one
        # its rest would be written without its BEGIN (each statement committed alone)
        conn = self.connection() if items[0] is _BEGIN else self._begun_on()
        writes = [h for h in items if not h[0].startswith(_CONTROL)]
        first = writes[0][2] if writes else items[0][2]
        count = sum(len(h[1]) if isinstance(h[1], list) else 1 for h in writes)
        try:
            with conn.pipeline(), conn.cursor() as cur:
                start = 0
                for i in range(1, len(items) + 1):
                    if i < len(items) and items[i][0] == items[start][0]:
                        continue
                    run = items[start:i]
                    rows: list[PgParams] = []
                    for _sql, params, _doing in run:
                        if isinstance(params, list):
                            rows.extend(params)
                        else:
                            rows.append(params)
                    if len(rows) == 1:
                        cur.execute(run[0][0], rows[0])
                    elif rows:
                        cur.executemany(run[0][0], rows)
                    start = i
        except psycopg.Error as exc:
            doing = (
                first if count <= 1 else f"{first} (or one of the {count - 1} writes sent with it)"
            )
            raise PgFailedWrite(doing, exc) from exc
        except Exception as exc:  # not the server's: a held value psycopg could not send (a
            # text UTF-8 cannot encode): the batch fails as for a failed write, rolled back
            # (it went out as the raw error, the transaction left open on the connection)
            raise StoreError(escaped(f"{self.where}: sending a batch's writes: {exc!r}")) from exc

    def _begun_on(self) -> psycopg.Connection[Any]:
        """The connection the open transaction began on, while the server has not ended it
        (a restart, an administrator, ``idle_in_transaction_session_timeout``): ended, the
        transaction was rolled back there, and nothing more of it is sent anywhere."""
        conn = self._conn
        if conn is None or conn.closed or conn.broken or _closed_by_server(conn):
            if conn is not None:
                conn.close()  # (nothing to roll back there; the next call connects again)
            raise StoreError(
                f"{self.where}: the server closed the connection mid-batch (the database"
                " stopped or restarted, or it ended the session): nothing of the batch was"
                " committed"
            )
        return conn

    def _send_held(self) -> None:
        """Send the held writes before a direct statement; a failure dooms the batch."""
        if not self._held:
            return
        if self._failed is not None:
            raise self._aborted("sending held writes")
        try:
            self._flush()
        except PgFailedWrite as exc:
            error = translate(exc.error, self.where, exc.doing)
            self._failed, self._doomed = error, True
            raise error from exc.error
        except StoreError as exc:  # (not the server's: ``_flush``)
            self._failed, self._doomed = exc, True
            raise

    def defer(self, sql: str, params: PgParams, doing: str) -> None:
        """A write whose result nobody needs: held until the open batch sends it; outside a
        batch, written and committed at once."""
        with self.lock:
            if self._depth == 0:
                with self.batch():
                    self._held.append((sql, params, doing))
                return
            if self._failed is not None:
                raise self._aborted(doing)
            self._held.append((sql, params, doing))

    def defer_rows(self, sql: str, rows: Sequence[PgParams], doing: str) -> None:
        """``defer`` of several rows of one statement, held as one entry."""
        if not rows:
            return
        with self.lock:
            if self._depth == 0:
                with self.batch():
                    self._held.append((sql, list(rows), doing))
                return
            if self._failed is not None:
                raise self._aborted(doing)
            self._held.append((sql, list(rows), doing))

    def lock_once(self, key: int, doing: str) -> None:
        """Hold ``pg_advisory_xact_lock(key)`` in the open batch, once per transaction: the
        lock is taken where it stands among the held writes and kept until the commit."""
        assert self._depth > 0, "lock_once() outside a transaction"
        if key in self._locked:
            return
        self.defer("SELECT pg_advisory_xact_lock(%s)", (key,), doing)
        self._locked.add(key)

    @contextmanager
    def writing(self) -> Iterator[None]:
        """A transaction for one write method: the open batch, or a batch of its own."""
        with self.lock:
            if self._depth > 0:
                yield
            else:
                with self.batch():
                    yield

    def write(self, sql: str, params: PgParams, doing: str) -> tuple[list[Any], int]:
        """One statement inside the open transaction (``writing``), now: its rows (if it
        returns any) and its row count. A failure dooms the batch."""
        assert self._depth > 0, "write() outside a transaction"
        return self._now(sql, params, doing)

    def read(self, sql: str, params: PgParams, doing: str) -> list[Any]:
        """Rows of a query: inside the open batch (after its held writes), or on its own."""
        with self.lock:
            if self._depth > 0:
                return self._now(sql, params, doing)[0]
            conn = self.connection()
            try:
                return conn.execute(sql, params).fetchall()
            except psycopg.Error as exc:
                raise translate(exc, self.where, doing) from exc
            except UnicodeEncodeError as exc:  # (a parameter: encoded before it is sent)
                raise refused(exc, doing) from exc

    def _now(self, sql: str, params: PgParams, doing: str) -> tuple[list[Any], int]:
        """A statement of the open batch, after what it holds: a batch's first statement
        (the fence's read, as a rule) goes with its ``BEGIN`` in one round trip."""
        conn = self.connection()
        begin = [h for h in self._held if h is not None] == [_BEGIN]
        if not begin:
            self._send_held()
        if self._failed is not None:
            raise self._aborted(doing)
        try:
            if begin:
                self._held = []
                self._flushes += 1
                with conn.pipeline(), conn.cursor() as first:
                    first.execute("BEGIN")
                    cur = conn.cursor()
                    cur.execute(sql, params)
            else:
                cur = conn.execute(sql, params)
            rows = cur.fetchall() if cur.description is not None else []
            return rows, cur.rowcount
        except psycopg.Error as exc:
            error = translate(exc, self.where, doing)
            self._failed = error
            raise error from exc
        except UnicodeEncodeError as exc:  # (a parameter, encoded before it is sent)
            if begin:  # (sent in a pipeline behind its BEGIN: the batch doomed all the same)
                self._failed, self._doomed = (
                    StoreError(escaped(f"{self.where}: {doing}: {exc}")),
                    True,
                )
            raise refused(exc, doing) from exc

    def decode(self, decoder: msgspec.json.Decoder[T], raw: str, table: str, key: object) -> T:
        try:
            return decoder.decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            said = f"{self.where}: cannot read {table} row {key!r}: {exc}"
            raise DamagedRow(said, str(key), table=table) from exc

    def close(self) -> None:
        """Close the connection (rolling back an unfinished batch). Idempotent."""
        with self.lock:
            if self._closed:
                return
            self._closed = True
            self._rollback()
            if self._conn is not None:
                self._conn.close()
