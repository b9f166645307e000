"""What opening a SQLite store made, taken back when the runtime then refuses it.

Why: a command that hosts a ``Runtime`` opens its store first (``cli.runtime_args``), and
the runtime checks only then that its runs' commands cannot write it (``StoreInReach``,
``runtime._store_reach``). Opening made the file (and its ``-wal``/``-shm``) and the folders
above it, so a refused `subagents run --state ./state/runs.sqlite3` left a database in the
workspace. The library checks a store named by its path before opening it; here the CLI
keeps the same promise: what did not exist before the opening is noted, and removed again
once the store is closed. Only that: a store that was already there, with its runs, and a
folder that already existed stay as they were. A ``postgresql://`` URL or a cluster's store
makes no file here.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

from subagents.store.locations import Location, default_location, is_database_url
from subagents.tools.sealed import SQLITE_SUFFIXES


@dataclass(frozen=True, slots=True)
class FreshStore:
    """A SQLite store's file that did not exist before this command opened it, and the
    topmost of its folders that did not exist either (None: its folder was there)."""

    path: Path
    top_made: Path | None

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
        top_made = None
        for folder in path.parents:
            if os.path.lexists(folder):
                break
            top_made = folder
        return cls(path, top_made)

    def remove(self) -> None:
        """The store's files (the database and SQLite's companions), then the folders this
        command made, each only while empty: nothing else that came to be there meanwhile."""
        for suffix in SQLITE_SUFFIXES:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{self.path}{suffix}")
        if self.top_made is None:
            return
        folder = self.path.parent
        while True:
            try:
                folder.rmdir()
            except OSError:  # not empty (or gone): what is left is not ours alone
                return
            if folder == self.top_made:
                return
            folder = folder.parent
