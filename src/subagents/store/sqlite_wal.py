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
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

from subagents.logs import get_logger
from subagents.store.base import StoreError
from subagents.store.sqlite_tx import Transactions

log = get_logger("subagents.store")

INTERVAL_S = 0.05
"""How often the thread checkpoints (a pass with nothing to copy costs a read of the log's
index, no I/O)."""

DEFAULT_PAGES = 1_000
"""SQLite's own automatic checkpoint (``PRAGMA wal_autocheckpoint``)."""

BACKSTOP_PAGES = 10_000
"""The store's own connection's automatic checkpoint while the thread runs (SQLite's
default, 1,000, without it)."""


class WalCheckpointer:
    """Checkpoints the log of a store's file every ``INTERVAL_S`` (see the module), from
    ``start`` until ``stop``; ``tx``: the store's transactions (its connection's automatic
    checkpoint becomes the backstop meanwhile)."""

    def __init__(self, path: Path, busy_timeout: float, tx: Transactions) -> None:
        self.path = path
        self.busy_timeout = busy_timeout
        self.tx = tx
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.passes = 0
        """Checkpoints made (for tests and logs)."""

    def start(self) -> Callable[[], None]:
        """Start the thread (once; not after ``stop``); ``stop``."""
        with self._lock:
            if self._thread is None and not self._stop.is_set():
                self._autocheckpoint(BACKSTOP_PAGES)
                self._thread = threading.Thread(
                    target=self._run, name="subagents-wal-checkpoint", daemon=True
                )
                self._thread.start()
        return self.stop

    def stop(self) -> None:
        """Stop the thread (it ends its pass under way first) and its connection; the
        store's own automatic checkpoint as SQLite's default again. Idempotent."""
        with self._lock:
            self._stop.set()
            thread, self._thread = self._thread, None
        if thread is None:
            return
        thread.join()
        with contextlib.suppress(StoreError):  # (a store closed meanwhile: nothing to do)
            self._autocheckpoint(DEFAULT_PAGES)

    def _autocheckpoint(self, pages: int) -> None:
        with self.tx.lock:
            self.tx.connection().execute(f"PRAGMA wal_autocheckpoint = {pages}")

    def _run(self) -> None:
        try:
            conn = sqlite3.connect(self.path, timeout=self.busy_timeout, isolation_level=None)
        except sqlite3.Error as exc:
            log.warning("store.checkpointer_failed", path=str(self.path), error=repr(exc))
            return
        try:
            conn.execute("PRAGMA synchronous = NORMAL")  # its checkpoints sync as the store's
            while not self._stop.wait(INTERVAL_S):
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                self.passes += 1
        except sqlite3.Error as exc:  # the file went away, say: the backstop checkpoints
            log.warning("store.checkpointer_failed", path=str(self.path), error=repr(exc))
        finally:
            conn.close()
