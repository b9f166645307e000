"""Files no file tool may read or change: the run store's.

Why: the store holds every run's record, its budget and its pending approvals; a run that
could write it could answer its own approvals or rewrite other runs' outcomes. The file
tools (Read, Write, Edit, NotebookEdit, LS, Glob, Grep) run in the runtime's process,
outside the sandbox, confined only by path to the workspace: when the store lies inside
the workspace (a ``plan`` runtime, one whose runs start no process, or one without the
sandbox) nothing but this check keeps them from it. The runtime refuses to start where
the runs' commands could write the store (``runtime._store_reach``).

Every file of a SQLite store is sealed, whether it exists yet or not: the database, its
``-wal``, ``-shm`` and ``-journal``. A path is compared after ``..`` and symlinks are
resolved (``Workspace.resolve``), by its directory's identity (device and inode, so a
second name of the directory is no way round) and its name case-folded (a case-insensitive
file system opens ``RUNS.SQLITE3`` too); and any path naming the same file as one of them
(a hardlink) is sealed too. A write is checked again on the directory it is made in, at
the moment it is made (``filestate.write_text``): a symlink swapped in meanwhile cannot
redirect it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from subagents.tools.errors import ToolError

SQLITE_SUFFIXES = ("", "-wal", "-shm", "-journal")
"""The files SQLite keeps for a database: the file, and beside it the ones it names after it."""


@dataclass(frozen=True)
class SealedFiles:
    """The store's files: where they are and what they are called."""

    directory: Path
    """The real path of the store's directory."""
    files: tuple[str, ...]
    """Their names."""
    names: frozenset[str]
    """Their names, case-folded."""
    shown: str
    """The store's path, for messages."""
    directory_key: tuple[int, int] | None = None
    """The directory's device and inode when the store was opened: the same directory
    under another name (moved since) is still the store's."""

    @classmethod
    def of_store(cls, path: str | os.PathLike[str]) -> SealedFiles:
        """The files of the SQLite store at ``path`` (a symlink to it resolved)."""
        real = Path(os.path.realpath(path))
        files = tuple(f"{real.name}{suffix}" for suffix in SQLITE_SUFFIXES)
        names = frozenset(name.casefold() for name in files)
        key = _identity(real.parent)
        return cls(real.parent, files, names, str(real), key)

    def holds(self, real: Path) -> bool:
        """Whether the resolved path ``real`` is one of the store's files or another name
        of one of them (a hardlink)."""
        if real.name.casefold() in self.names and self._is_directory(real.parent):
            return True
        try:
            target = os.stat(real)
        except OSError:
            return False
        return any(_identity(self.directory / name) == _key(target) for name in self.files)

    def _is_directory(self, path: Path) -> bool:
        """Whether ``path`` is the store's directory: by its path now, or by what it was
        when the store was opened (the directory renamed since, into the workspace say)."""
        if _same(path, self.directory):
            return True
        return self.directory_key is not None and _identity(path) == self.directory_key

    def holds_entry(self, directory: int, name: str) -> bool:
        """Whether ``name`` in the open directory ``directory`` is one of the store's files
        (what a write about to be made there would replace)."""
        if name.casefold() not in self.names:
            return False
        try:
            here = _key(os.fstat(directory))
        except OSError:
            return False
        return here in (self.directory_key, _identity(self.directory))

    def refuse(self, real: Path, shown: str) -> None:
        """ToolError when ``real`` is sealed."""
        if self.holds(real):
            raise ToolError(
                f"{shown} is a file of the run store {self.shown}: no file tool may read or"
                " change it (it holds the runs' records and approvals)"
            )


def _key(st: os.stat_result) -> tuple[int, int]:
    return (st.st_dev, st.st_ino)


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        return _key(os.stat(path))
    except OSError:
        return None


def _same(a: Path, b: Path) -> bool:
    if a == b:
        return True
    first, second = _identity(a), _identity(b)
    return first is not None and first == second
