"""A listing that meets damaged records (``ps``, ``approvals``): every other run shown, each
damaged one named.

A runs row that no longer reads as its record (hand-edited, written by a tool that knows
nothing of its schema) is that row's fault, not the store's (``store.base.DamagedRow``):
one such row made the whole listing an error, hiding every other run. The listing now
leaves it out, shows the rest, names each damaged row on stderr (its run id and what is
wrong) and exits 1, as any error does (docs/cli.md).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from subagents.cli.state import EXIT_FAILED, EXIT_OK
from subagents.logs import printable

if TYPE_CHECKING:
    from subagents.cli.state import InspectedStore
    from subagents.messages import RunRecord
    from subagents.store.base import DamagedRow


def read_sparing(store: InspectedStore, run_id: str, damaged: list[DamagedRow]) -> RunRecord | None:
    """The record of ``run_id``; None if there is none or it is damaged (then named in
    ``damaged``, once)."""
    from subagents.store.base import DamagedRow

    try:
        return store.get_run(run_id)
    except DamagedRow as exc:
        if all(seen.key != exc.key for seen in damaged):
            damaged.append(exc)
        return None


def said(command: str, damaged: Sequence[DamagedRow]) -> int:
    """Each damaged row named on stderr (after the listing); the command's exit code."""
    for exc in damaged:
        sys.stderr.write(
            printable(f"subagents {command}: error: {exc} (left out; the other runs are shown)\n")
        )
    return EXIT_FAILED if damaged else EXIT_OK
