"""WalCheckpointer: a SQLite store's write-ahead log moved into its database file by a
thread of its own, not by whichever commit makes the log long.

Why: in WAL mode each commit appends to the log, and SQLite's own automatic checkpoint runs
inside the commit that takes the log past 1,000 pages: that commit copies the log into the
database and syncs both files (``synchronous = NORMAL`` syncs at checkpoints). When senders
record their own mail (``store.sqlite_record``) that commit is, most often, a mail's, on its
way to its recipient: a durable ping-pong of ~7 pages per mail paid a checkpoint every ~150
mails, and its rate rose by 30-75% with the checkpoints taken off its path (measured: the
same ping-pong with ``wal_autocheckpoint = 0``, three interleaved pairs, load 8-9).

So a store whose senders record their mail checkpoints from a thread of its own, on a
connection of its own (``PRAGMA wal_checkpoint(PASSIVE)`` every ``INTERVAL_S``: it copies
what the log holds without waiting for any reader or writer, and without blocking them; it
does nothing, and syncs nothing, when nothing was written since). The store's connection
keeps SQLite's automatic checkpoint as a backstop, at ``BACKSTOP_PAGES``, in case the
thread falls behind. Durability is the commit's, as before: a checkpoint only moves what is
already durable in the log.

While nothing is written the thread rests longer between passes (up to ``IDLE_S``; a
sender's record wakes it: ``nudge``), so an idle runtime is not woken 20 times a second. A
pass that fails (a full disk, say) is logged and tried again later, so the thread outlives
the failure and checkpoints again once the store takes writes. Several runtimes on one
store share the thread: it runs from the first ``start`` to the last ``stop``.

A log that once grew long (a reader held the checkpoints back, or the thread fell behind and
the backstop let it reach ~40 MB) is trimmed again: once the thread has run, the store's
connection has ``PRAGMA journal_size_limit`` (``LOG_LIMIT_BYTES``), so the first commit that
starts the log over after a complete checkpoint truncates the file (SQLite otherwise reuses
the file at its largest for good).

A ``stop`` waits for the pass under way at most its ``timeout`` (a close has a deadline;
one pass over a big log, on a loaded disk, can take long): then the pass is interrupted
(``sqlite3.Connection.interrupt``), and if it still does not end the thread is left to end
by itself (it is a daemon, its stop is set, and its connection is its own) and logged.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from subagents.logs import get_logger
from subagents.store.base import StoreError
from subagents.store.sqlite_tx import Transactions

log = get_logger("subagents.store")

INTERVAL_S = 0.05
"""How often the thread checkpoints while the log takes writes."""

IDLE_S = 1.0
"""The longest the thread rests between passes while nothing is written (each idle pass
doubles the rest from ``INTERVAL_S`` up to this): an idle runtime is not woken 20 times a
second. A sender's record wakes it at once (``nudge``); any other write waits at most this
long, the backstop meanwhile."""

DEFAULT_PAGES = 1_000
"""SQLite's own automatic checkpoint (``PRAGMA wal_autocheckpoint``)."""

BACKSTOP_PAGES = 10_000
"""The store's own connection's automatic checkpoint while the thread runs (SQLite's
default, 1,000, without it)."""

LOG_LIMIT_BYTES = 32 * 1024 * 1024
"""The store's connection's ``PRAGMA journal_size_limit`` once the thread has run: what a
log that grew longer is truncated to when it starts over after a complete checkpoint. Above
what a busy store writes between two passes, so that the log is reused, not cut and grown
again at every start over: a durable ping-pong writes ~8 pages of 4 KB per mail, ~10 MB per
``INTERVAL_S`` at 6,000 mails/s, and a log cut to 4 MB (the limit before) grew back through
newly allocated blocks after each start over: measured on a bare loop of the sender's record
statement (6,000 commits, two interleaved rounds, load ~14), 58-76 us of CPU per commit at
4 MB against 46-51 at 32 MB and 45-52 with no limit."""

STOP_WAIT_S = 10.0
"""How long a ``stop`` (or the store's ``close``) waits for the pass under way by default."""

INTERRUPTED_WAIT_S = 1.0
"""How long a ``stop`` waits again after interrupting a pass that outlived its timeout."""


class CheckpointPacing:
    """How long the thread rests after a pass (a decision, no I/O): ``INTERVAL_S`` after a
    pass that found the log grown or not yet copied, twice the last rest (up to ``IDLE_S``)
    after one that found it as the pass before left it, or that failed (the next one tries
    again: a full disk, say, may have room by then)."""

    def __init__(self) -> None:
        self.rest = INTERVAL_S
        self._last: tuple[int, int] | None = None

    def after(self, frames: int, copied: int) -> float:
        """The rest after a pass that found ``frames`` in the log, ``copied`` of them now in
        the database file (``PRAGMA wal_checkpoint``'s second and third columns)."""
        seen = (frames, copied)
        if seen == self._last and copied >= frames:
            self.rest = min(IDLE_S, self.rest * 2)
        else:
            self.rest = INTERVAL_S
        self._last = seen
        return self.rest

    def failed(self) -> float:
        """The rest after a pass that failed: doubled too (a disk that stays full is tried
        every ``IDLE_S``), the next pass that copies back to ``INTERVAL_S``."""
        self._last = None
        self.rest = min(IDLE_S, self.rest * 2)
        return self.rest


class _Pass:
    """The thread's own connection, to interrupt its pass from another thread (only while
    it is open: ``sqlite3_interrupt`` on a connection being closed is undefined)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.conn: sqlite3.Connection | None = None

    def interrupt(self) -> None:
        with self.lock, contextlib.suppress(sqlite3.Error):
            if self.conn is not None:
                self.conn.interrupt()

    def close(self) -> None:
        with self.lock:
            conn, self.conn = self.conn, None
        if conn is not None:
            conn.close()


class StopCheckpoints(Protocol):
    """What ``WalCheckpointer.start`` returns: stops the thread for its user, waiting for
    the pass under way at most ``timeout`` seconds."""

    def __call__(self, timeout: float = STOP_WAIT_S) -> None: ...


def _nothing(timeout: float = STOP_WAIT_S) -> None:
    """A closed store's stop: nothing was started."""


def _connect(path: Path, busy_timeout: float) -> sqlite3.Connection:
    return sqlite3.connect(path, timeout=busy_timeout, isolation_level=None)


class WalCheckpointer:
    """Checkpoints the log of a store's file (see the module) while one or more users
    (runtimes) have it started, from ``start`` to the last ``stop`` it returned, or
    ``close``; ``tx``: the store's transactions (its connection's automatic checkpoint
    becomes the backstop meanwhile); ``connect``: how the thread opens its own connection
    (``sqlite3.connect``, on the store's file, with the store's busy timeout)."""

    def __init__(
        self,
        path: Path,
        busy_timeout: float,
        tx: Transactions,
        connect: Callable[[Path, float], sqlite3.Connection] = _connect,
    ) -> None:
        self.path = path
        self.busy_timeout = busy_timeout
        self.tx = tx
        self.connect = connect
        self._stop = threading.Event()
        """The running thread's (each thread has its own: one stopping is not one started)."""
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._users = 0
        self._closed = False
        self._pass = _Pass()
        self.resting = False
        """The thread rests longer than ``INTERVAL_S`` (nothing was written): ``nudge``."""
        self.written = False
        """Something was written since the thread's last pass began (``nudge``)."""
        self.lingering = 0
        """Threads a ``stop`` gave up waiting for (for tests and logs)."""
        self.passes = 0
        """Checkpoints made (for tests and logs)."""
        self.failures = 0
        """Passes that failed (for tests and logs)."""

    def start(self) -> StopCheckpoints:
        """Start the thread unless it runs (not once the store is closed); the call that
        stops it for this user (once; the thread ends with its last user)."""
        with self._lock:
            if self._closed:
                return _nothing
            if self._thread is None:
                self._autocheckpoint(BACKSTOP_PAGES)  # (raises for a store closing: no user)
                self._stop, self._wake, self._pass = threading.Event(), threading.Event(), _Pass()
                self._thread = threading.Thread(
                    target=self._run,
                    args=(self._stop, self._wake, self._pass),
                    name="subagents-wal-checkpoint",
                    daemon=True,
                )
                self._thread.start()
            self._users += 1
        done = threading.Event()

        def stop(timeout: float = STOP_WAIT_S) -> None:
            with self._lock:
                if done.is_set():
                    return
                done.set()
                self._users = max(0, self._users - 1)
                if self._users > 0:
                    return
            self._end(timeout)

        return stop

    def close(self, timeout: float = STOP_WAIT_S) -> None:
        """Stop the thread whoever started it, for good (the store closes), waiting for its
        pass under way at most ``timeout``. Idempotent."""
        with self._lock:
            self._closed = True
            self._users = 0
        self._end(timeout)

    def nudge(self) -> None:
        """Something was written: a resting thread checkpoints at once (cheap otherwise: two
        attribute accesses, no lock, on every sender's record). No lock, and no write lost:
        ``written`` is set before ``resting`` is read, and the thread sets ``resting``
        before it reads ``written`` (``_rest``), so of a nudge that finds the thread not
        yet resting the thread sees the write and does not rest long."""
        self.written = True
        if self.resting:
            self._wake.set()

    def _end(self, timeout: float) -> None:
        """Stop the thread (it ends its pass under way first, within ``timeout``) and its
        connection; the store's own automatic checkpoint as SQLite's default again."""
        with self._lock:
            if self._users > 0:  # started again meanwhile
                return
            self._stop.set()
            self._wake.set()
            thread, self._thread = self._thread, None
            running = self._pass
        if thread is None:
            return
        thread.join(max(0.0, timeout))
        if thread.is_alive():  # a pass outlived the close's patience: it is interrupted
            running.interrupt()
            thread.join(INTERRUPTED_WAIT_S)
        if thread.is_alive():
            self.lingering += 1
            log.warning(
                "store.checkpointer_lingers",
                path=str(self.path),
                timeout=timeout,
                detail="a checkpoint pass did not end; its thread ends by itself after it",
            )
        with self._lock, contextlib.suppress(StoreError):  # (a closed store: nothing to do)
            if self._thread is None:  # (not started again meanwhile)
                self._autocheckpoint(DEFAULT_PAGES)

    def _autocheckpoint(self, pages: int) -> None:
        with self.tx.lock:
            conn = self.tx.connection()
            conn.execute(f"PRAGMA wal_autocheckpoint = {pages}")
            conn.execute(f"PRAGMA journal_size_limit = {LOG_LIMIT_BYTES}")  # (kept after)

    def _rest(self, rest: float, wake: threading.Event) -> None:
        """Rest ``rest`` seconds, or until nudged; not longer than ``INTERVAL_S`` when
        something was written during the last pass (``nudge``: its order of the two flags)."""
        self.resting = rest > INTERVAL_S
        if self.resting and self.written:
            rest = INTERVAL_S
        wake.wait(rest)
        wake.clear()
        self.resting = False

    def _run(self, stop: threading.Event, wake: threading.Event, running: _Pass) -> None:
        try:
            conn = self.connect(self.path, self.busy_timeout)
        except sqlite3.Error as exc:  # the backstop checkpoints
            log.warning("store.checkpointer_failed", path=str(self.path), error=repr(exc))
            return
        with running.lock:
            running.conn = conn  # (from here a stop's interrupt reaches it)
        try:
            conn.execute("PRAGMA synchronous = NORMAL")  # its checkpoints sync as the store's
            conn.execute(f"PRAGMA journal_size_limit = {LOG_LIMIT_BYTES}")
        except sqlite3.Error as exc:
            running.close()
            if not stop.is_set():  # (not a stop's interrupt)
                log.warning("store.checkpointer_failed", path=str(self.path), error=repr(exc))
            return
        pacing = CheckpointPacing()
        rest = INTERVAL_S
        failing = False
        try:
            while True:
                self._rest(rest, wake)
                if stop.is_set():
                    return
                self.written = False  # (before the pass: a write after it is seen next)
                try:
                    row = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                except sqlite3.Error as exc:  # a full disk, say: a later pass tries again
                    if stop.is_set():  # interrupted by a stop that waited long enough
                        return
                    if not failing:  # once per failing spell, not every pass
                        log.warning("store.checkpoint_failed", path=str(self.path), error=repr(exc))
                    failing = True
                    self.failures += 1
                    rest = pacing.failed()
                    continue
                if failing:
                    log.info("store.checkpoint_recovered", path=str(self.path))
                failing = False
                self.passes += 1
                rest = pacing.after(int(row[1]), int(row[2]))
        finally:
            running.close()
