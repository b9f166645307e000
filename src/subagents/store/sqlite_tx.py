"""Transactions of the SQLite store: its one connection, batches, savepoints, held writes.

Why apart from ``SQLiteStore``: how writes are grouped, held and committed is one concern;
which rows the store keeps (runs, events, mail...) is another. ``SQLiteStore`` owns a
``Transactions`` and writes and reads through it.

Thread model: one connection, guarded by one reentrant lock (hence
``check_same_thread=False``). The supervisor thread is the main writer; agents' threads
write the mail they take straight to its recipients (a batch each, serialised with the
supervisor's by the lock); other threads read.
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
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, Literal, TypeVar

import msgspec

from subagents.logs import get_logger
from subagents.store.base import StoreError
from subagents.store.deferred import DeferredWrites, FailedWrite
from subagents.store.errors import translate

log = get_logger("subagents.store")

T = TypeVar("T")

_ENCODER = msgspec.json.Encoder()


def encode_row(obj: Any, decoder: msgspec.json.Decoder[Any], what: str) -> str:
    """``obj`` as JSON text, checked to read back.

    JSON has no NaN or infinity: msgspec writes them as ``null``, which a float field then
    refuses to read. A record that would be written fine and never read again is refused
    here instead, with its name, before anything is written.
    """
    try:
        raw = _ENCODER.encode(obj)
        decoder.decode(raw)
    except (TypeError, msgspec.EncodeError, msgspec.ValidationError) as exc:
        raise ValueError(
            f"cannot store {what}: {exc} (NaN and infinite numbers cannot be stored)"
            if isinstance(exc, msgspec.ValidationError)
            else f"cannot store {what}: {exc}"
        ) from exc
    return raw.decode("utf-8")


class _Batch:
    """``Transactions.batch()``: enter and exit call the transactions; ``mark`` is set when
    nested."""

    __slots__ = ("mark", "name", "tx")

    def __init__(self, tx: Transactions) -> None:
        self.tx = tx
        self.mark: tuple[int, int] | None = None
        self.name = ""

    def __enter__(self) -> None:
        self.tx._enter_batch(self)

    def __exit__(self, kind: object, exc: object, tb: object) -> Literal[False]:
        self.tx._exit_batch(self, kind is not None)
        return False


class Transactions:
    """The store's connection and the transactions on it (see the module docstring)."""

    def __init__(
        self,
        path: Path,
        conn: sqlite3.Connection,
        *,
        on_close: Callable[[], AbstractContextManager[object]] = contextlib.nullcontext,
    ) -> None:
        """``on_close``: the context the connection is closed in (``dbfile.OpenFiles``)."""
        self.path = path
        self._on_close = on_close
        self.lock = threading.RLock()
        self._conn = conn
        self._depth = 0
        self._failed: StoreError | None = None
        self._doomed = False
        """A held write failed: the whole batch is lost, not just a nested one."""
        self._held = DeferredWrites()
        self._closed = False

    @property
    def in_batch(self) -> bool:
        """A batch is open (on the thread holding the lock)."""
        return self._depth > 0

    def connection(self) -> sqlite3.Connection:
        if self._closed:
            raise StoreError(f"{self.path}: the store is closed")
        return self._conn

    def batch(self) -> AbstractContextManager[None]:
        """Group the writes made inside into one transaction, committed at exit.

        A class rather than a generator context manager: the supervisor opens one (nested in
        its group commit) per message it handles."""
        return _Batch(self)

    def _enter_batch(self, batch: _Batch) -> None:
        self.lock.acquire()
        try:
            conn = self.connection()
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
            self.lock.release()
            raise

    def _exit_batch(self, batch: _Batch, failed: bool) -> None:
        try:
            if batch.mark is not None:
                self._exit_savepoint(batch, failed)
            else:
                self._end(self._conn, commit=not failed)
        finally:
            self.lock.release()

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

    def defer(self, table: str, sql: str, params: tuple[Any, ...], doing: str) -> None:
        """A write whose result nobody needs: held until the open batch sends it (see
        ``store.deferred``); outside a batch, written and committed at once."""
        with self.lock:
            if self._depth == 0:
                with self.writing() as conn:
                    self.write_sql(conn, sql, params, doing)
                return
            if self._failed is not None:
                raise self._aborted(doing)
            self._held.add(table, sql, params, doing)

    def defer_rows(self, table: str, sql: str, rows: list[tuple[Any, ...]], doing: str) -> None:
        """``_defer`` of several rows of one statement, held as one entry; ``doing`` names
        the first row (the error of a failed ``executemany`` names the first and the count)."""
        if not rows:
            return
        with self.lock:
            if self._depth == 0:
                with self.writing() as conn:  # one transaction for all of them
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
    def writing(self) -> Iterator[sqlite3.Connection]:
        """A transaction for one write method: the open batch, or a batch of its own."""
        with self.lock:
            if self._depth > 0:
                yield self.connection()
            else:
                with self.batch():
                    yield self.connection()

    def write_sql(
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

    def read(self, sql: str, params: Iterable[Any], doing: str) -> list[Any]:
        with self.lock:
            conn = self.connection()
            if self._held:  # only the batch's own thread gets here while it is open
                self._send_held(conn)
            try:
                return conn.execute(sql, tuple(params)).fetchall()
            except sqlite3.Error as exc:
                raise translate(exc, self.path, doing) from exc

    def decode(self, decoder: msgspec.json.Decoder[T], raw: str, table: str, key: object) -> T:
        try:
            return decoder.decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise StoreError(f"{self.path}: cannot read {table} row {key!r}: {exc}") from exc

    def close(self) -> None:
        """Close the connection (rolling back an unfinished batch). Idempotent."""
        with self.lock:
            if self._closed:
                return
            self._closed = True
            self._held.clear()
            self._rollback(self._conn)
            with self._on_close():
                self._conn.close()
