"""Opening a SQLite file as a store: a connection to it, WAL mode (retried while other
processes open it at once), its schema created or upgraded, its size capped. Apart from
``sqlite`` (``SQLiteStore``), which holds the rows once the file is open."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import tenacity

from subagents.logs import get_logger
from subagents.store.base import StoreError
from subagents.store.errors import SQLITE_BUSY, SQLITE_LOCKED, primary_code, translate
from subagents.store.migrations import inspect_version, upgrade

log = get_logger("subagents.store")


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


_NO_CAP = 0xFFFFFFFE
"""SQLite's own largest page count: no cap but SQLite's (and the disk's)."""


def cap(conn: sqlite3.Connection, max_bytes: int | None) -> None:
    if max_bytes is None:
        conn.execute(f"PRAGMA max_page_count = {_NO_CAP}")
        return
    (page_size,) = conn.execute("PRAGMA page_size").fetchone()
    conn.execute(f"PRAGMA max_page_count = {max(1, max_bytes // int(page_size))}")


def opened(
    conn: sqlite3.Connection, path: Path, busy_timeout: float, max_bytes: int | None
) -> tuple[int | None, int]:
    """The file of ``conn`` made ready as a store (WAL, its schema created or upgraded): the
    schema versions (found, now)."""
    doing = "opening the store"
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
        # Read first, write nothing: a foreign or newer file is refused untouched
        # (switching to WAL would already rewrite its header).
        doing = "reading the schema"
        inspect_version(conn, path)
        doing = "switching to WAL mode"
        mode = _switch_to_wal(conn, busy_timeout)
        if str(mode).lower() != "wal":
            raise StoreError(
                f"{path}: cannot use WAL mode (journal mode stays {mode!r}); the "
                f"store needs a local file system that supports shared memory"
            )
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
        doing = "creating or upgrading the schema"
        found, version = upgrade(conn, path)
        cap(conn, max_bytes)
    except sqlite3.Error as exc:
        raise translate(exc, path, doing) from exc
    if found is not None and found != version:
        log.info("store.upgraded", path=str(path), from_version=found, to_version=version)
    return found, version


def connect(path: Path, busy_timeout: float) -> sqlite3.Connection:
    """A new connection to the store's file (autocommit: ``store.sqlite_tx`` begins its own
    transactions)."""
    try:
        return sqlite3.connect(
            path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
        )
    except sqlite3.Error as exc:
        raise translate(exc, path, "opening the store") from exc
