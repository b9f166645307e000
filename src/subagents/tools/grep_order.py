"""Grep's file list newest first (Claude Code's order): every file ripgrep found is ``stat``ed.

When a pattern is everywhere, the list is every file of the tree, so this is Grep's own cost
beyond ripgrep's: kept to one ``stat`` and one float per file, and no object per file.

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
    """ripgrep's ``--files-with-matches --null`` output as text paths, newest first, equal
    times in path order."""
    raw_paths = listing.split(b"\0")[:-1]
    # one decode for all; U+FFFD never makes a NUL, so the two splits pair up
    shown = listing.decode("utf-8", "replace").split("\0")[:-1]
    times = mtimes(raw_paths)
    order = sorted(range(len(shown)), key=shown.__getitem__)
    order.sort(key=times.__getitem__, reverse=True)
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
