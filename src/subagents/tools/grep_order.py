"""Grep's file list newest first (Claude Code's order): every file ripgrep found is ``stat``ed.

When a pattern is everywhere, the list is every file of the tree, so this is Grep's own cost
beyond ripgrep's: kept to one ``stat`` and one float per file, no object per file, and done
while ripgrep still searches (``Listing``, fed as its output grows), not after it.

- Each path is ``stat``ed as the bytes ripgrep printed, not as the text shown: no encoding per
  call, and a name that is not UTF-8 (shown with U+FFFD) is found under its real name, so it
  takes its place by its time (the text it is shown as names no file: it sorted last, as if
  deleted).
- The order is two stable sorts of indexes, by path and then by time, newest first (a stable
  ``reverse`` keeps equal times in path order): the same order as a sort on ``(-mtime,
  path)``, without a tuple per file to build and compare.
- A file gone between ripgrep's listing and its ``stat`` (or one that cannot be ``stat``ed)
  counts as time 0: listed last, in path order, not an error.
- ``os.stat`` follows a symlink, as before: a link is ordered by its target's time.
"""

from __future__ import annotations

import os


def newest_first(listing: bytes) -> list[str]:
    """ripgrep's whole ``--files-with-matches --null`` output as text paths, newest first."""
    found = Listing()
    found.feed(listing)
    return found.newest_first()


class Listing:
    """ripgrep's ``--null`` file list as it grows: each complete path is ``stat``ed as soon as
    it is read, while ripgrep still searches, so that the stats run beside its search (on a
    core it leaves idle) rather than after it."""

    def __init__(self) -> None:
        self._raw: list[bytes] = []
        self._times: list[float] = []
        self._rest = b""  # a path whose NUL has not come yet

    def feed(self, data: bytes) -> None:
        """More of ripgrep's output: its complete paths are stat'ed now."""
        parts = (self._rest + data).split(b"\0")
        self._rest = parts.pop()
        self._raw += parts
        self._times += mtimes(parts)

    def newest_first(self) -> list[str]:
        """The paths as text, newest first, equal times in path order."""
        if not self._raw:
            return []
        # one decode for all; U+FFFD never makes a NUL, so the paths pair up with the bytes
        shown = b"\0".join(self._raw).decode("utf-8", "replace").split("\0")
        order = sorted(range(len(shown)), key=shown.__getitem__)
        order.sort(key=self._times.__getitem__, reverse=True)
        return [shown[i] for i in order]


def mtimes(raw_paths: list[bytes]) -> list[float]:
    """Each path's modification time (``os.stat``'s float); 0.0 where it cannot be read."""
    stat = os.stat
    times: list[float] = []
    append = times.append
    for path in raw_paths:
        try:
            append(stat(path).st_mtime)
        except OSError:  # gone since ripgrep listed it, or not reachable
            append(0.0)
    return times
