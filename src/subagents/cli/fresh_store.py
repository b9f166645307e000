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
it (a run, a host's lease, an event), or when another process has it open (held so while
the file is read once more and the files go: ``store.unused_file.held_alone``, SQLite's own
locks, so no connection reads or writes it meanwhile). The last read is made with that held,
the store closed (its own connection gone): another command that recorded a run and closed
between this one's close and the lock has left it in the file (its close checkpoints the
WAL), read there (``store.unused_file.nothing_recorded``). A process that had opened the
file and run no statement yet when it goes hears a ``StoreError`` at its first (see
``store/unused_file.py``), never a silently empty new store.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from subagents.store.base import RunStore, StoreError
from subagents.store.locations import Location, default_location, is_database_url
from subagents.store.unused_file import held_alone, nothing_recorded
from subagents.tools.sealed import SQLITE_SUFFIXES


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
        """Whether the file at ``path`` is the one the opening made, nothing is recorded in
        it and no connection has it open, held so (``held_alone``) until the block ends."""
        with held_alone(self.path) as alone:
            yield alone and self._same_file() and nothing_recorded(self.path)

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
