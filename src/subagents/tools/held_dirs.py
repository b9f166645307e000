"""Directories held by the process that made them, and swept by a later one once it is gone.

Why: a process ended by SIGKILL (a host killed by Ray, the OOM killer, a test's timeout)
cannot remove its temporary directories: every runtime's scratch one (``shells-*``), every
stdio MCP server's (``mcp-*``) and, since session 28, its fallback home of them
(``tools/scratch.py``). Nothing removed them: 200 were left in ``/tmp/subagents-0`` after a
day of tests here (session 29). Age is no sign of a maker's death (a runtime lives for
weeks), and a pid is reused; a lock is exact: each directory is ``flock``ed for its maker's
life (the kernel lets the lock go however the process ends, SIGKILL included), so one whose
lock can be taken is one whose maker is gone.

The rules of a sweep (``sweep``), each against a case seen or argued:
- only names that carry the mark of a held directory (``MARK``, after ``mkdtemp``'s random
  part, whose letters are never ``-``): a directory of an older version, which holds no
  lock, may belong to a live process of that version (a mixed upgrade): never swept
  (session 28's sweep removed such a live fallback home);
- only the directory it locked, still at its name (the same device and inode), ours: not
  one another process put at that name since;
- what is in it is removed through the locked descriptor, never through a path that a
  symlink could turn elsewhere; the name last, if it still names what was emptied;
- a maker takes its lock before it uses its directory, and checks that it is still the one
  it made (a sweeper may take the lock between ``mkdtemp`` and ``flock``, and remove it):
  else it makes another (``make``).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path

MARK = "-h"
"""The end of a held directory's name (``mkdtemp``'s random part never holds ``-``)."""

_OPEN = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def make(parent: Path, prefix: str) -> tuple[Path, int]:
    """A new private directory ``prefix`` + random + ``MARK`` in ``parent``, and the
    descriptor that holds its lock (kept open for as long as the directory is used;
    ``release``). ``OSError`` when none can be made."""
    for _ in range(8):
        made = Path(tempfile.mkdtemp(prefix=prefix, suffix=MARK, dir=parent))
        try:
            fd = os.open(made, _OPEN)
        except FileNotFoundError:
            continue  # (a sweeper removed it before it was even opened)
        fcntl.flock(fd, fcntl.LOCK_EX)  # (waits while a sweeper empties it: then made anew)
        with contextlib.suppress(OSError):
            if _same(os.stat(made, follow_symlinks=False), os.fstat(fd)):
                return made, fd
        os.close(fd)
    raise OSError(f"every directory made in {parent} was removed at once")


def release(made: Path, fd: int) -> None:
    """Remove ``made`` and all in it (its maker is done with it), then let its lock go."""
    try:
        shutil.rmtree(made, ignore_errors=True)
    finally:
        os.close(fd)


def sweep(parent: Path, prefixes: Iterable[str]) -> list[Path]:
    """Remove the held directories in ``parent`` named ``prefix...MARK`` for one of
    ``prefixes`` whose lock can be taken (their maker is gone); a live maker's (its lock
    refuses), another user's, a symlink or an unmarked one stays. The ones removed."""
    starts, mine, removed = tuple(prefixes), os.getuid(), []
    with contextlib.suppress(OSError), os.scandir(parent) as entries:
        for entry in entries:
            name = entry.name
            if name.startswith(starts) and name.endswith(MARK) and _swept(parent, name, mine):
                removed.append(Path(entry.path))
    return removed


def _swept(parent: Path, name: str, mine: int) -> bool:
    try:
        fd = os.open(parent / name, _OPEN)  # (a symlink is refused here: never followed)
    except OSError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False  # (held: its maker lives)
        held = os.fstat(fd)
        if held.st_uid != mine or not _same(os.stat(parent / name, follow_symlinks=False), held):
            return False  # (not ours, or no longer the directory at that name)
        _empty(fd)
        with contextlib.suppress(OSError):
            if _same(os.stat(parent / name, follow_symlinks=False), held):
                os.rmdir(parent / name)
        return True
    except OSError:
        return False  # (gone meanwhile)
    finally:
        os.close(fd)


def _empty(fd: int) -> None:
    """Remove all in the directory open at ``fd``, through it (``rmtree`` below it works by
    descriptors too: it follows no symlink)."""
    for entry in os.listdir(fd):
        with contextlib.suppress(OSError):
            found = os.stat(entry, dir_fd=fd, follow_symlinks=False)
            if stat.S_ISDIR(found.st_mode):
                shutil.rmtree(entry, dir_fd=fd)
            else:
                os.unlink(entry, dir_fd=fd)


def _same(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)
