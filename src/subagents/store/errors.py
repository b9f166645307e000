"""SQLite's failures turned into StoreErrors that say what is wrong in words a user acts on.

Why: the caller of a store should not have to know SQLite's result codes to tell a full disk
from a corrupt file from a read-only path, and every message must name the file. The primary
result code (the low byte of the extended code) picks the words; SQLite's own message is kept
after them.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from subagents.store.base import AlreadyEnded, StoreBusy, StoreError

# SQLite primary result codes (https://sqlite.org/rescode.html)
SQLITE_PERM = 3
SQLITE_BUSY = 5
SQLITE_LOCKED = 6
SQLITE_READONLY = 8
SQLITE_IOERR = 10
SQLITE_CORRUPT = 11
SQLITE_FULL = 13
SQLITE_CANTOPEN = 14
SQLITE_CONSTRAINT = 19

SECOND_END = "subagents: a run's second end is refused"
"""The start of the message of the trigger that refuses a run's second end
(``migrations.v13_to_v14``): an ``AlreadyEnded``."""

OLDER_PROCESS_STOP = (
    "; a process of subagents older than this store's schema (v14 on SQLite, v5 on"
    " PostgreSQL) that sees this must stop: a newer runtime upgraded the store, and this"
    " process's writes are refused as they come"
)
"""What the trigger's message goes on to say, for whoever reads it without knowing the
trigger: a process of before v14 (it reads it as a plain ``StoreError`` and retries), one
already running when a newer one upgraded the file (docs/store.md, v14)."""
SQLITE_NOTADB = 26

_REASONS = {
    SQLITE_FULL: "disk full: the store could not grow (the disk or the store's size limit "
    "is full); the transaction was rolled back",
    SQLITE_READONLY: "read-only: the store file or its directory cannot be written",
    SQLITE_PERM: "read-only: permission denied",
    SQLITE_CORRUPT: "corrupt database",
    SQLITE_NOTADB: "not a SQLite database (or a corrupt one)",
    SQLITE_BUSY: "busy: another connection held the write lock longer than the busy timeout",
    SQLITE_LOCKED: "locked: a conflicting operation on the same connection",
    SQLITE_CANTOPEN: "cannot open the database file (a missing or read-only directory?)",
    SQLITE_IOERR: "I/O error",
}


def primary_code(exc: sqlite3.Error) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    return None if code is None else int(code) & 0xFF


def translate(exc: sqlite3.Error, path: Path, doing: str) -> StoreError:
    """A StoreError for ``exc``, raised while ``doing`` something to the store at ``path``."""
    code = primary_code(exc)
    if code == SQLITE_CONSTRAINT and SECOND_END in str(exc):  # (the trigger: one end a run)
        return AlreadyEnded(f"{path}: {doing}: {SECOND_END}: the run ended already")
    reason = _REASONS.get(code) if code is not None else None
    detail = str(exc)
    if reason is None:
        reason = detail
    elif detail:
        reason = f"{reason} (sqlite: {detail})"
    kind = StoreBusy if code == SQLITE_BUSY else StoreError
    return kind(f"{path}: {doing}: {reason}")
