"""Whether the store's file is still the one the console opened.

Why: SQLite reads the file it opened, not its path. A store deleted (or replaced: a backup
restored, ``rm`` and a new ``subagents run``) while the console serves it would go on being
shown from the old file, silently, forever: new runs at the same path never appear, and a
run's page says "no run X in the store". So the console compares the path's file with the
one it opened (device and inode), and once they differ it says so instead of serving stale
runs (docs/console.md, "Limits").
"""

from __future__ import annotations

import os
from pathlib import Path


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        return None
    return stat.st_dev, stat.st_ino


class StoreFile:
    """The store's file at ``path`` as it was when made (just after the store was opened)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.identity = _identity(path)

    def gone(self) -> str | None:
        """Why the store served is no longer the file at its path, or None while it is."""
        now = _identity(self.path)
        if now == self.identity:
            return None
        what = "deleted" if now is None else "replaced by another file"
        return (
            f"the store {self.path} was {what} while the console served it: what it shows"
            " would be stale; stop it (Ctrl-C) and start `subagents serve` again"
        )
