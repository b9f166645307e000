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
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from subagents.cli.state import EXIT_FAILED, EXIT_OK
from subagents.logs import printable

if TYPE_CHECKING:
    from subagents.cli.state import InspectedStore
    from subagents.messages import RunRecord, TreeNode
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


def cut_off(
    shown: Iterable[TreeNode], records: Iterable[RunRecord], damaged: Sequence[DamagedRow]
) -> list[RunRecord]:
    """Of ``records`` (a tree's, read whole), the runs not ``shown`` because their parent
    is a damaged row: a tree view reaches a run through its parent, so a damaged run hid
    its healthy subtree (named by ``said``, each shown by its own `tree`)."""
    keys = {d.key for d in damaged}
    seen = {n.run_id for n in shown}
    return [r for r in records if r.run_id not in seen and r.parent_run_id in keys]


def said(command: str, damaged: Sequence[DamagedRow], under: Sequence[RunRecord] = ()) -> int:
    """Each damaged row named on stderr (after the listing), and each run ``under`` one
    (``cut_off``); the command's exit code."""
    for exc in damaged:
        sys.stderr.write(
            printable(f"subagents {command}: error: {exc} (left out; the rest is shown)\n")
        )
    for r in under:
        sys.stderr.write(
            printable(
                f"subagents {command}: run {r.run_id} ({r.agent}) is under the damaged run"
                f" {r.parent_run_id}, not shown: `subagents tree {r.run_id}` shows its subtree\n"
            )
        )
    return EXIT_FAILED if damaged else EXIT_OK
