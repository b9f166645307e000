"""Transactions of the SQLite store: its one connection, batches, savepoints, held writes.

Why apart from ``SQLiteStore``: how writes are grouped, held and committed is one concern;
which rows the store keeps (runs, events, mail...) is another. ``SQLiteStore`` owns a
``Transactions`` and writes and reads through it.

Thread model: one connection, guarded by one reentrant lock (hence
``check_same_thread=False``). The supervisor thread is the main writer; agents' threads
write the mail they take straight to its recipients (a transaction each, serialised with the
supervisor's by the lock: ``commit_rows``); other threads read.
Batches begin lazily: each thread has its own batch state (``_Open``), and a batch is Python
data (held writes) until it first needs the connection: a read or a direct write from its
thread, or its commit with something held. Only then does it take the lock and ``BEGIN
IMMEDIATE`` (its ``on_begin`` check first in the transaction: the fence), and it keeps both
until its end. So the supervisor's open group, held while it decides, makes a sender wait
only for its commit, not for its decisions; a batch with nothing held at its end costs no
statement at all. A read inside a batch begins it, so a read-modify-write in one batch stays
atomic, as when every batch began at once. From its first statement to its commit a batch
holds the lock, so another thread's reads wait for it (for the time of a few inserts) and
never see half a batch, exactly as with the in-memory store; reads from the writer's own
thread inside a batch see its uncommitted writes (held ones are sent first). Other
processes open their own ``SQLiteStore`` on the same path; SQLite's locks serialise them
with this one.

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
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, Literal, TypeVar

import msgspec

from subagents.logs import get_logger
from subagents.store.base import AlreadyEnded, DamagedRow, StoreError
from subagents.store.deferred import DeferredWrites, FailedWrite
from subagents.store.errors import translate
from subagents.store.lone_surrogates import escaped, refused
from subagents.store.row_checks import READS_BACK

log = get_logger("subagents.store")

T = TypeVar("T")

_ENCODER = msgspec.json.Encoder()

Rows = tuple[str, str, list[tuple[Any, ...]], str]
"""Rows of one statement to write: its table, its SQL, the rows, what it does (for an
error: the first row's)."""


def spare_damaged(
    decode: Callable[[msgspec.json.Decoder[T], str, str, Any], T],
    decoder: msgspec.json.Decoder[T],
    table: str,
    rows: Iterable[Any],
    damaged: list[DamagedRow] | None,
) -> list[T]:
    """Each of ``rows`` (its key, its JSON, and its parent run if read) of ``table``
    decoded (a store's transactions' ``decode``, which names the row in its error). A
    damaged row raises ``DamagedRow``; with ``damaged`` given (a listing: ``ps``, the
    console) it is left out and its error appended there instead, placed under its parent
    (``DamagedRow.at``: a view of a subtree tells whether it is in what it shows), so the
    listing shows every other row and names it (SQLite's and PostgreSQL's ``list_runs``)."""
    if damaged is None:
        return [decode(decoder, raw, table, key) for key, raw, *_ in rows]
    decoded: list[T] = []
    for key, raw, *parent in rows:
        try:
            decoded.append(decode(decoder, raw, table, key))
        except DamagedRow as exc:
            damaged.append(exc.at(parent[0]) if parent else exc)
    return decoded


def encode_row(obj: Any, decoder: msgspec.json.Decoder[Any], what: str) -> str:
    """``obj`` as JSON text, checked to read back.

    JSON has no NaN or infinity: msgspec writes them as ``null``, which a float field then
    refuses to read; a document nested deeper than msgspec's decoder goes (a few levels less
    than its encoder) cannot be read either. A record that would be written fine and never
    read again is refused here instead, with its name, before anything is written. A record
    that surely reads
    back (``row_checks.READS_BACK``: the ones written per mail) is not decoded to know it.
    """
    try:
        raw = _ENCODER.encode(obj)
        sure = READS_BACK.get(type(obj))
        if sure is None or decoder.type is not type(obj) or not sure(obj, raw):
            decoder.decode(raw)
    except UnicodeEncodeError as exc:  # a lone surrogate somewhere in its texts
        raise ValueError(
            f"cannot store {what}: a text in it holds a lone surrogate"
            f" ({exc.object[exc.start : exc.end]!r}), which UTF-8 cannot encode"
        ) from exc
    except (TypeError, msgspec.EncodeError, msgspec.ValidationError, RecursionError) as exc:
        raise ValueError(
            f"cannot store {what}: {exc} (NaN and infinite numbers cannot be stored)"
            if isinstance(exc, msgspec.ValidationError)
            else f"cannot store {what}: {exc}"
        ) from exc
    return raw.decode("utf-8")


class _Batch:
    """``Transactions.batch()``: enter and exit call the transactions; ``mark`` is set when
    nested."""

    __slots__ = ("mark", "name", "on_begin", "tx")

    def __init__(self, tx: Transactions, on_begin: Callable[[], None] | None) -> None:
        self.tx = tx
        self.on_begin = on_begin
        self.mark: tuple[int, int] | None = None
        self.name = ""

    def __enter__(self) -> None:
        self.tx._enter_batch(self)

    def __exit__(self, kind: object, exc: object, tb: object) -> Literal[False]:
        self.tx._exit_batch(self, kind is not None)
        return False


class _Open:
    """One thread's batch: how deep, what it holds, whether its transaction has begun (the
    thread then holds the lock until the outermost batch ends), what failed in it."""

    __slots__ = ("begun", "depth", "doomed", "failed", "held", "on_begin", "refused")

    def __init__(self) -> None:
        self.depth = 0
        self.begun = False
        self.held = DeferredWrites()
        self.failed: StoreError | None = None
        self.doomed = False
        """A held write failed: the whole batch is lost, not just a nested one."""
        self.on_begin: Callable[[], None] | None = None
        self.refused: BaseException | None = None
        """Why the transaction could not begin (a lock, a lease lost): the batch's error."""


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
        self._local = threading.local()
        self._closed = False

    def _open(self) -> _Open:
        """This thread's batch state."""
        try:
            state: _Open = self._local.state
        except AttributeError:
            state = self._local.state = _Open()
        return state

    @property
    def in_batch(self) -> bool:
        """A batch is open on this thread."""
        return self._open().depth > 0

    @property
    def begun(self) -> bool:
        """This thread's open batch has begun its transaction: it holds the lock (and
        SQLite's write lock) until it ends."""
        return self._open().begun

    def connection(self) -> sqlite3.Connection:
        if self._closed:
            raise StoreError(f"{self.path}: the store is closed")
        return self._conn

    def batch(self, on_begin: Callable[[], None] | None = None) -> AbstractContextManager[None]:
        """Group the writes made inside into one transaction, committed at exit.

        Lazy: the transaction begins (the lock taken, ``BEGIN IMMEDIATE``) only when the
        batch first needs the connection: a read or a direct write from its thread, or its
        commit with writes held. Until then it is Python data on its thread, so another
        thread's batch (a sender recording its mail) does not wait for the supervisor's
        decisions, only for its commit. ``on_begin`` (outermost batch only) runs first in
        the transaction once it has begun: the fence check, so it is inside the
        transaction whose writes it guards (``store.fencing``).

        A class rather than a generator context manager: the supervisor opens one (nested in
        its group commit) per message it handles."""
        return _Batch(self, on_begin)

    def _enter_batch(self, batch: _Batch) -> None:
        state = self._open()
        if state.depth > 0:
            self._enter_savepoint(state, batch)
            return
        self.connection()  # a closed store refuses at once
        state.failed = None
        state.refused = None
        state.doomed = False
        state.held.clear()
        state.begun = False
        state.on_begin = batch.on_begin
        state.depth = 1

    def _begin(self, state: _Open) -> sqlite3.Connection:
        """This thread's open batch as a transaction: the lock taken and ``BEGIN IMMEDIATE``
        (once), its ``on_begin`` check run in it."""
        if state.begun:
            return self._conn
        self.lock.acquire()
        try:
            conn = self.connection()
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise translate(exc, self.path, "starting a batch") from exc
            state.begun = True
            check, state.on_begin = state.on_begin, None
            if check is not None:
                held, state.held.items = state.held.items, []  # checked before any write
                try:
                    check()
                except BaseException:
                    state.begun = False
                    self._rollback(conn)
                    raise
                finally:
                    state.held.items = held
        except BaseException as exc:
            self.lock.release()
            state.held.clear()
            state.doomed = True
            state.refused = exc
            if isinstance(exc, StoreError):
                state.failed = exc
            raise
        return conn

    def _exit_batch(self, batch: _Batch, failed: bool) -> None:
        state = self._open()
        if batch.mark is not None:
            self._exit_savepoint(state, batch, failed)
        else:
            self._end(state, commit=not failed)

    def _end(self, state: _Open, *, commit: bool) -> None:
        begun = state.begun
        try:
            if commit and state.held and state.failed is None:
                with contextlib.suppress(StoreError):  # it is in state.failed: reported below
                    self._send_held(state)
                begun = state.begun
            failed = state.failed
            conn = self._conn
            if commit and (failed is not None or state.refused is not None):
                if begun:
                    self._rollback(conn)
                if state.refused is not None:  # as it was raised (``Fenced``...)
                    raise state.refused
                said = f"{self.path}: batch rolled back: a write in it failed ({failed})"
                if isinstance(failed, AlreadyEnded):  # (of its kind: a caller acts on it)
                    raise AlreadyEnded(said, failed.key) from failed
                raise StoreError(said) from failed
            if not begun:  # nothing reached SQLite: nothing to commit or undo
                return
            if commit:
                try:
                    conn.execute("COMMIT")
                    return
                except sqlite3.Error as exc:
                    self._rollback(conn)
                    raise translate(exc, self.path, "committing a batch") from exc
            self._rollback(conn)
        finally:
            state.held.clear()
            state.depth = 0
            state.failed = None
            state.refused = None
            state.doomed = False
            state.on_begin = None
            if state.begun:
                state.begun = False
                self.lock.release()

    def _rollback(self, conn: sqlite3.Connection) -> None:
        if conn.in_transaction:
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error as exc:  # the connection is unusable; say so, keep going
                log.error("store.rollback_failed", path=str(self.path), error=str(exc))

    def _enter_savepoint(self, state: _Open, batch: _Batch) -> None:
        """A nested batch. Its SAVEPOINT is held like a write: if nothing was sent to SQLite
        while it was open (the common case: the supervisor nests one per message), ending
        it costs no statement at all, and failing it just forgets its held writes."""
        if state.failed is not None:
            raise self._aborted(state, "starting a nested batch")
        batch.name = f"batch_{state.depth}"
        batch.mark = state.held.mark(f"SAVEPOINT {batch.name}", "starting a nested batch")
        state.depth += 1

    def _exit_savepoint(self, state: _Open, batch: _Batch, failed: bool) -> None:
        assert batch.mark is not None
        state.depth -= 1
        held = state.held
        sent = held.sent_since(batch.mark)
        if not failed:
            if sent:
                held.mark(f"RELEASE {batch.name}", "ending a nested batch")
            else:
                held.void(batch.mark)
            return
        if not sent:  # nothing of it reached SQLite (so no write of it failed there)
            held.drop(batch.mark)
            return
        held.clear()  # everything still held was written inside this savepoint
        conn = self._conn
        if state.begun and conn.in_transaction:
            try:
                conn.execute(f"ROLLBACK TO {batch.name}")
                conn.execute(f"RELEASE {batch.name}")
                if not state.doomed:
                    state.failed = None  # its failed writes are undone
            except sqlite3.Error as exc:
                state.failed = translate(exc, self.path, "undoing a nested batch")

    def _aborted(self, state: _Open, doing: str) -> StoreError:
        return StoreError(
            f"{self.path}: {doing}: the batch was aborted by an earlier failed write "
            f"({state.failed or 'the transaction was rolled back'})"
        )

    def _send_held(self, state: _Open) -> None:
        """Send the held writes of this thread's open batch (before a read, a direct write,
        a commit), beginning its transaction if it has not yet. A failure aborts the whole
        batch, whichever nested batch made the write."""
        if state.failed is not None or (state.begun and not self._conn.in_transaction):
            first = next((e for e in state.held.items if e is not None), None)
            state.held.clear()
            raise self._aborted(state, first[3] if first is not None else "sending held writes")
        conn = self._begin(state)
        try:
            state.held.flush(conn)
        except FailedWrite as exc:
            error = translate(exc.error, self.path, exc.doing)
            state.failed, state.doomed = error, True
            raise error from exc.error
        except Exception as exc:  # not SQLite's: a held value its binding refused (a text
            # UTF-8 cannot encode): the batch fails as for a failed write, rolled back, its
            # write lock let go (it went out as the raw error, the transaction left open)
            error = StoreError(escaped(f"{self.path}: sending a batch's writes: {exc!r}"))
            state.failed, state.doomed = error, True
            raise error from exc

    def defer(self, table: str, sql: str, params: tuple[Any, ...], doing: str) -> None:
        """A write whose result nobody needs: held until the open batch sends it (see
        ``store.deferred``); outside a batch, written and committed at once. (``_open`` inline
        and the entry appended here: the supervisor defers two event rows per durable
        mail.)"""
        try:
            state: _Open = self._local.state
        except AttributeError:
            state = self._open()
        if state.depth == 0:
            with self.writing() as conn:
                self.write_sql(conn, sql, params, doing)
            return
        if state.failed is not None:
            raise self._aborted(state, doing)
        state.held.items.append((table, sql, params, doing))

    def defer_rows(self, table: str, sql: str, rows: list[tuple[Any, ...]], doing: str) -> None:
        """``_defer`` of several rows of one statement, held as one entry; ``doing`` names
        the first row (the error of a failed ``executemany`` names the first and the count)."""
        if not rows:
            return
        state = self._open()
        if state.depth == 0:
            with self.writing() as conn:  # one transaction for all of them
                try:
                    conn.executemany(sql, rows)
                except sqlite3.Error as exc:
                    error = translate(exc, self.path, f"{doing} ({len(rows)} rows)")
                    state.failed = error
                    raise error from exc
            return
        if state.failed is not None:
            raise self._aborted(state, doing)
        state.held.add_rows(table, sql, rows, doing)

    def commit_rows(self, writes: Sequence[Rows], check: Callable[[], None] | None = None) -> None:
        """``writes`` (each a statement's rows) as one transaction of their own, ``check`` run
        first in it (a fence): the least a write on its own costs (``BEGIN IMMEDIATE``, the
        check, an ``executemany`` per statement, ``COMMIT``: the mail a sender takes straight
        to its recipient, with the journal entries it told before it). Inside a batch of
        this thread they are held with it instead (its own check ran)."""
        state = self._open()
        if state.depth > 0:
            for table, sql, rows, doing in writes:
                self.defer_rows(table, sql, rows, doing)
            return
        with self.lock:
            conn = self.connection()
            doing = "starting a batch"
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise translate(exc, self.path, doing) from exc
            try:
                if check is not None:
                    check()
                for write in writes:
                    _, sql, rows, doing = write  # (``doing``: what an error names)
                    if len(rows) == 1:
                        conn.execute(sql, rows[0])
                    else:
                        conn.executemany(sql, rows)
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                self._rollback(conn)
                raise translate(exc, self.path, doing) from exc
            except BaseException:
                self._rollback(conn)
                raise

    def execute_alone(self, sql: str, params: tuple[Any, ...], doing: str) -> int | None:
        """``sql`` as a transaction of its own (autocommit: a write statement takes the
        write lock before it reads, so what it reads and writes is one transaction); the
        rows it changed. None, and nothing run, while a batch is open on this thread
        (``in_batch``: its writes go in it). (The checks inline, not ``in_batch`` and
        ``connection``: three calls fewer on a sender's record of every durable mail.)"""
        state = getattr(self._local, "state", None)
        if state is not None and state.depth > 0:
            return None
        with self.lock:
            if self._closed:
                raise StoreError(f"{self.path}: the store is closed")
            conn = self._conn
            if conn.in_transaction:  # (one left open would take the write and not commit it)
                raise StoreError(f"{self.path}: {doing}: a transaction is open on the connection")
            try:
                return conn.execute(sql, params).rowcount
            except sqlite3.Error as exc:
                raise translate(exc, self.path, doing) from exc
            except UnicodeEncodeError as exc:  # (a parameter: bound, never run)
                raise refused(exc, doing) from exc

    @contextmanager
    def writing(self) -> Iterator[sqlite3.Connection]:
        """A transaction for one write method: the open batch (begun now), or a batch of
        its own."""
        state = self._open()
        if state.depth > 0:
            if state.failed is not None:
                raise self._aborted(state, "writing")
            yield self._begin(state)
        else:
            with self.batch():
                yield self._begin(state)

    def write_sql(
        self, conn: sqlite3.Connection, sql: str, params: Iterable[Any], doing: str
    ) -> sqlite3.Cursor:
        state = self._open()
        if state.held:
            self._send_held(state)
        if state.failed is not None or (state.depth > 0 and not conn.in_transaction):
            raise self._aborted(state, doing)
        try:
            return conn.execute(sql, tuple(params))
        except sqlite3.Error as exc:
            error = translate(exc, self.path, doing)
            if state.depth > 0:
                state.failed = error
            raise error from exc
        except UnicodeEncodeError as exc:  # (a parameter: bound, never run)
            raise refused(exc, doing) from exc

    def read(self, sql: str, params: Iterable[Any], doing: str) -> list[Any]:
        """Rows of ``sql``. Inside a batch, its transaction begins first (and its held
        writes are sent, so the read sees them): what a batch reads stays true until it
        commits (a fence check, a restore's read of the leases before it takes runs over)."""
        state = self._open()
        if state.depth > 0:
            if state.held:
                self._send_held(state)
            elif state.refused is None:  # (one that could not begin reads what is committed)
                self._begin(state)
        with self.lock:
            conn = self.connection()
            try:
                return conn.execute(sql, tuple(params)).fetchall()
            except sqlite3.Error as exc:
                raise translate(exc, self.path, doing) from exc
            except UnicodeEncodeError as exc:  # (a parameter: bound, never run)
                raise refused(exc, doing) from exc

    def decode(self, decoder: msgspec.json.Decoder[T], raw: str, table: str, key: object) -> T:
        try:
            return decoder.decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            said = f"{self.path}: cannot read {table} row {key!r}: {exc}"
            raise DamagedRow(said, str(key), table=table) from exc

    def close(self) -> None:
        """Close the connection (rolling back an unfinished batch). Idempotent."""
        with self.lock:
            if self._closed:
                return
            self._closed = True
            self._open().held.clear()
            self._rollback(self._conn)
            with self._on_close():
                self._conn.close()
