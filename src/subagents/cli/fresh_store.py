"""What opening a SQLite store made, taken back when the command then used it for nothing.

Why: a command that hosts a ``Runtime`` opens its store first (``cli.runtime_args``), and
the runtime checks only then that its runs' commands cannot write it (``StoreInReach``,
``runtime._store_reach``). Opening made the file (and its ``-wal``/``-shm``) and the folders
above it, so a refused `subagents run --state ./state/runs.sqlite3` left a database in the
workspace; so did any other refusal (a definition in error, an unknown agent). The library
checks a store named by its path before opening it; here the CLI keeps the same promise:
what did not exist before the opening is noted, and removed again once the store is closed
if nothing was recorded in it. Only that: a store that was already there, with its runs, and
a folder that already existed stay as they were. A ``postgresql://`` URL or a cluster's
store makes no file here.

Another process may open the same path meanwhile (two commands started at once with the same
new ``--state``): the store is then theirs too, and is kept when the file at the path is no
longer the one this opening made (its device and inode), or when anything was recorded in
it (a run, a host's lease, an event), or when another process has it open (SQLite's
connections each hold a read lock on the ``-shm`` file's "DMS" byte for their lifetime:
taken here for writing, without waiting, and held while the file is read once more and the
files go, so no connection reads or writes it meanwhile). The last read is made with that
lock held, the store closed (its own connection gone): another command that recorded a run
and closed between this one's close and the lock has left it in the file (its close
checkpoints the WAL), read there.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from subagents.store.base import RunStore, StoreError
from subagents.store.locations import Location, default_location, is_database_url
from subagents.tools.sealed import SQLITE_SUFFIXES

SHM_DMS_BYTE = 128
"""The byte of a WAL database's ``-shm`` file every open connection holds a read lock on
(SQLite's unix VFS: ``UNIX_SHM_DMS``, after the 8 WAL locks at 120; sqlite.org/walformat)."""
RECORDS = ("runs", "leases", "events")
"""The tables one of which a store anyone used holds a row of (``_unused``)."""


@dataclass(frozen=True, slots=True)
class FreshStore:
    """A SQLite store's file that did not exist before this command opened it, and the
    topmost of its folders that did not exist either (None: its folder was there)."""

    path: Path
    top_made: Path | None
    made: tuple[int, int] | None = None
    """The device and inode of the file the opening made (``opened``); None: not noted."""

    @classmethod
    def before_opening(cls, location: Location | None) -> FreshStore | None:
        """What opening ``location`` (None: ``--state``'s default) would make; None when it
        makes no file of its own (a database's URL), or the file is there already."""
        try:
            where = default_location() if location is None else location
        except ValueError:
            return None  # `open_store` reports it
        if is_database_url(where):
            return None
        path = Path(where).expanduser().absolute()
        if os.path.lexists(path):
            return None
        return cls(path, top_missing(path.parent))

    def opened(self) -> FreshStore:
        """This, with the file the opening made noted (what ``take_back`` removes only if
        it is still the one at the path)."""
        try:
            found = os.stat(self.path)
        except OSError:
            return self
        return replace(self, made=(found.st_dev, found.st_ino))

    def take_back(self, store: RunStore) -> bool:
        """Close ``store`` (opened at ``path``) and remove what its opening made, if it is
        still this command's alone: nothing recorded in it, the same file at the path, no
        other connection to it. Whether it was removed."""
        try:  # (the file is looked at while open too: its inode cannot be reused then)
            unused = _unused(store) and self._same_file()
        finally:
            store.close()
        if not unused:
            return False
        with self._alone() as alone:
            if alone:
                self.remove()
            return alone

    @contextlib.contextmanager
    def _alone(self) -> Iterator[bool]:
        """Whether the file at ``path`` is the one the opening made and no connection has it
        open, held so (the ``-shm`` file's DMS byte locked for writing) until the block ends."""
        name = f"{self.path}-shm"
        made = not os.path.lexists(name)  # the last connection removed it: made, locked
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
            yield self._same_file() and self._nothing_in_file()
            if made:  # (still locked: no connection maps it; one waiting opens it again)
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(name)
        finally:
            os.close(shm)  # (its lock goes with it)

    def _nothing_in_file(self) -> bool:
        """Nothing recorded in the file at ``path``, read as it lies (no connection can have
        it open: ``_alone``): no WAL left with frames in it, no run, lease or event."""
        try:
            if os.path.getsize(f"{self.path}-wal") > 0:
                return False
        except FileNotFoundError:
            pass
        except OSError:
            return False
        try:  # immutable: read without SQLite's locks or -shm (which this process holds)
            conn = sqlite3.connect(f"{self.path.as_uri()}?immutable=1", uri=True)
            try:
                return not any(
                    conn.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone() for table in RECORDS
                )
            finally:
                conn.close()
        except sqlite3.Error:
            return False

    def _same_file(self) -> bool:
        """The file at ``path`` is the one the opening made."""
        try:
            found = os.stat(self.path)
        except OSError:
            return False
        return self.made is not None and (found.st_dev, found.st_ino) == self.made

    def remove(self) -> None:
        """The store's files (the database and SQLite's companions), then the folders this
        command made, each only while empty: nothing else that came to be there meanwhile."""
        for suffix in SQLITE_SUFFIXES:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{self.path}{suffix}")
        if self.top_made is not None:
            remove_made_folders(self.path.parent, self.top_made)


def remove_made_folders(folder: Path, top_made: Path) -> None:
    """``folder`` and those above it up to ``top_made``, each only while empty (what is left
    in one is not this command's alone)."""
    while True:
        try:
            folder.rmdir()
        except OSError:  # not empty (or gone)
            return
        if folder == top_made:
            return
        folder = folder.parent


def top_missing(folder: Path) -> Path | None:
    """The topmost of ``folder`` and its parents that does not exist (None: it exists)."""
    top = None
    for each in (folder, *folder.parents):
        if os.path.lexists(each):
            break
        top = each
    return top


def _unused(store: RunStore) -> bool:
    """Nothing recorded in ``store``: no run, no host's lease, no event (a store another
    process used meanwhile has one at least once it started); False when it cannot be read."""
    try:
        return not store.list_runs(limit=1) and not store.leases() and store.last_event_seq() == 0
    except StoreError:
        return False
