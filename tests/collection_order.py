"""The command line's test paths, put in an order where each folder's are together.

Why: pytest 9.1 loses a subfolder's ``conftest.py`` fixtures when its paths are interleaved
with a path of the folder above it (``pytest tests/runtime/test_a.py tests/test_messages.py
tests/runtime/test_b.py``: every test of ``test_b.py`` asking for a ``tests/runtime``
fixture errors with "fixture 'no_new_threads' not found"). Re-entering the subfolder makes a
second collector for it, and its conftest's fixtures are bound to the first one only
(pytest-dev/pytest#14964, #14971, #14997, #15071; 9.0 did not, nor does 9.2.0: checked
with test_collection_order.py's command, ungrouped; this can go once pyproject.toml allows
no 9.1). The root conftest hands pytest the same paths grouped by folder instead, depth
first, each folder, file and test at the place of its first mention: an order with no
folder interleaved is left as it is."""

from __future__ import annotations

import os
from pathlib import Path


def grouped_by_folder(args: list[str], invoked_in: Path) -> list[str]:
    """``args`` (pytest's paths, ``file.py::test`` node ids among them, relative to
    ``invoked_in``) reordered so that no folder's are split by another's: sorted by the
    first mention of each of their path's parts, outermost first (a stable sort)."""
    first: dict[tuple[str, ...], int] = {}
    parts_of: list[tuple[str, ...]] = []
    for index, arg in enumerate(args):
        path, _, _ = arg.partition("::")
        # (``..`` resolved as pytest resolves an argument, ``os.path.abspath``: from
        # tests/runtime, ``../test_messages.py`` is not in the runtime folder)
        parts = Path(os.path.abspath(invoked_in / path)).parts
        parts_of.append(parts)
        for depth in range(1, len(parts) + 1):
            first.setdefault(parts[:depth], index)

    def key(index: int) -> tuple[int, ...]:
        parts = parts_of[index]
        return tuple(first[parts[:depth]] for depth in range(1, len(parts) + 1))

    return [args[i] for i in sorted(range(len(args)), key=key)]
