"""A listing that meets damaged records (``ps``, ``approvals``): every other run and
approval shown, each damaged row named.

A runs or approvals row that no longer reads as its record (hand-edited, written by a tool
that knows nothing of its schema) is that row's fault, not the store's
(``store.base.DamagedRow``): one such row made the whole listing an error, hiding every
other run (a damaged approvals row: every approval, and every run in ``ps``). The listing
now leaves it out, shows the rest, names each damaged row on stderr (its key and what is
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


def spared_once(damaged: list[DamagedRow], met: Sequence[DamagedRow]) -> list[DamagedRow]:
    """Of ``met`` (a later read's damaged rows), those not in ``damaged`` yet: added there
    and returned (to be named now, once)."""
    new = [d for d in met if all(seen.key != d.key for seen in damaged)]
    damaged.extend(new)
    return new


def said(command: str, damaged: Sequence[DamagedRow]) -> int:
    """Each damaged row named on stderr (after the listing); the command's exit code."""
    for exc in damaged:
        sys.stderr.write(
            printable(f"subagents {command}: error: {exc} (left out; the rest is shown)\n")
        )
    return EXIT_FAILED if damaged else EXIT_OK
