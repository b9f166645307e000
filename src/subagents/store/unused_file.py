"""Whether a SQLite store's file is unused, and held so while it is removed: the SQLite
facts a caller that made a store for nothing (``cli.fresh_store``: a refused `subagents run`)
needs to take it back without taking another process's store with it.

- **Nobody has it open** (``held_alone``): SQLite's unix VFS has every connection hold a
  read lock on one byte of the WAL index (the ``-shm`` file's "DMS" byte, ``UNIX_SHM_DMS``,
  after the 8 WAL locks at 120; sqlite.org/walformat) for as long as it is connected.
  Taking that byte for writing, without waiting, succeeds only while no connection has the
  file mapped; held, no connection can map it meanwhile (one that comes waits, then opens
  the index again).
- **Nothing recorded in it** (``nothing_recorded``): read as the file lies, with
  ``immutable=1`` (no locks, no ``-shm``: the caller holds its DMS byte), after making sure
  no WAL with frames is left beside it (what is in a WAL is not in the file yet).

What they do not cover, and what a process in that gap sees (tests/store/test_unused_file.py,
two real processes): a connection made (``sqlite3.connect``: the file opened) that has run
no statement yet holds no lock. Its file removed under it, its first statement fails with
SQLite's "disk I/O error" (its database file is gone: the WAL index it opens by name is not
the one of the file it holds), which the store reports as a ``StoreError`` while opening;
it never reads or writes a silently empty new store.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

SHM_DMS_BYTE = 128
"""The byte of a WAL database's ``-shm`` file every open connection holds a read lock on."""

RECORDS = ("runs", "leases", "events")
"""The tables one of which a store anyone used holds a row of: a run, a host's lease (a
runtime that started), an event."""


@contextlib.contextmanager
def held_alone(path: Path) -> Iterator[bool]:
    """Whether no connection has the SQLite file at ``path`` open, held so (its ``-shm``
    file's DMS byte locked for writing) until the block ends. A ``-shm`` file this made (the
    last connection had removed it) is removed again before the lock is let go."""
    name = f"{path}-shm"
    made = not os.path.lexists(name)
    try:
        shm = os.open(name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError:
        yield False
        return
    try:
        try:
            fcntl.lockf(shm, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, SHM_DMS_BYTE)
        except OSError:  # a connection holds it: someone has the store open
            yield False
            return
        yield True
        if made:  # (still locked: no connection maps it; one waiting opens it again)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name)
    finally:
        os.close(shm)  # (its lock goes with it)


def nothing_recorded(path: Path) -> bool:
    """Nothing recorded in the SQLite store at ``path``, read as it lies (call it inside
    ``held_alone``: no connection may have it open): no WAL left with frames in it, and no
    row in any of ``RECORDS``. False when it cannot be read (kept, not removed)."""
    try:
        if os.path.getsize(f"{path}-wal") > 0:
            return False
    except FileNotFoundError:
        pass
    except OSError:
        return False
    try:  # immutable: read without SQLite's locks or -shm (which the caller holds)
        conn = sqlite3.connect(f"{path.absolute().as_uri()}?immutable=1", uri=True)
        try:
            return not any(
                conn.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone() for table in RECORDS
            )
        finally:
            conn.close()
    except sqlite3.Error:
        return False
