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
from collections.abc import Collection, Iterable, Sequence
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
        if all(seen.row != exc.row for seen in damaged):
            damaged.append(exc)
        return None


def spared_once(damaged: list[DamagedRow], met: Sequence[DamagedRow]) -> list[DamagedRow]:
    """Of ``met`` (a later read's damaged rows), those not in ``damaged`` yet: added there
    and returned (to be named now, once)."""
    new = [d for d in met if all(seen.row != d.row for seen in damaged)]
    damaged.extend(new)
    return new


def a_run(row: DamagedRow) -> bool:
    """Whether ``row`` is a runs row (or one of a table not said: taken as one)."""
    return row.table in ("runs", None)


def placed(row: DamagedRow, root: str) -> bool:
    """Whether the store read where ``row`` hangs in the tree of ``root``
    (``DamagedRow.placed``) and that place can be so: a parent read as none (NULL) is only
    a root's, and ``root`` is the only root of its tree; a non-root row whose parent column
    was hand-emptied too would be taken for a root, outside every view but its own."""
    return row.placed and (row.parent is not None or (a_run(row) and row.key == root))


def within(
    run_id: str, records: Sequence[RunRecord], damaged: Sequence[DamagedRow], root: str
) -> list[DamagedRow]:
    """Of ``damaged`` (the rows a read of ``run_id``'s whole tree left out), those under
    ``run_id``, the subtree a view shows (`tree`, `info`, `attach` of any run of a tree):
    a view fails only for damage in what it shows. A row is placed by what the store could
    still read beside its document (``DamagedRow.placed``: a runs row's parent, an
    approvals row's run), then up the chain of ``records``' parents (and of placed damaged
    runs rows). A row whose chain cannot be followed to a root (unplaced, or passing
    through a run that is neither read nor placed) may be under ``run_id``: it is kept,
    named and failing the view, which cannot say it shows its subtree whole. ``root``: the
    tree's root (``placed``)."""
    parents: dict[str, str | None] = {r.run_id: r.parent_run_id for r in records}
    for row in damaged:
        if a_run(row) and placed(row, root) and row.key is not None:
            parents[row.key] = row.parent
    kept: list[DamagedRow] = []
    for row in damaged:
        if not placed(row, root):
            kept.append(row)
            continue
        node = row.key if a_run(row) else row.parent
        seen: set[str] = set()
        while node is not None and node != run_id and node in parents and node not in seen:
            seen.add(node)
            node = parents[node]
        if node is not None and (node == run_id or node not in parents or node in seen):
            kept.append(row)  # (under it, or a chain that cannot be followed: it may be)
    return kept


def children_of(run_id: str, damaged: Sequence[DamagedRow], root: str) -> list[DamagedRow]:
    """Of ``damaged`` (runs rows of the tree of ``root``), those of ``run_id``'s children
    (`info` lists them): placed under ``run_id``, or unplaced (it may be one of them)."""
    return [d for d in damaged if a_run(d) and (not placed(d, root) or d.parent == run_id)]


def cut_off(
    shown: Collection[str], records: Iterable[RunRecord], damaged: Sequence[DamagedRow]
) -> list[RunRecord]:
    """Of ``records`` (a tree's, read whole), the runs not ``shown`` because their parent
    is a damaged runs row of ``damaged`` (``within`` the view): a tree view reaches a run
    through its parent, so a damaged run hid its healthy subtree. Each is the top of a cut
    subtree (its own children hidden with it): named by ``said``, each shown by its own
    `tree`."""
    keys = {d.key for d in damaged if a_run(d)}
    return [r for r in records if r.run_id not in shown and r.parent_run_id in keys]


class Sighted:
    """What a view read again and again (`attach`) has named: each damaged row under its
    run, and each run cut off under one, named on stderr once, when first met."""

    def __init__(self, command: str) -> None:
        self.command = command
        self.damaged: list[DamagedRow] = []
        self.cut: set[str] = set()

    def met(
        self,
        record: RunRecord,
        records: Sequence[RunRecord],
        shown: Collection[str],
        damaged: Sequence[DamagedRow],
    ) -> None:
        """A read of ``record``'s tree (``records``, ``shown`` of them under it) that left
        ``damaged`` out: what of it is under ``record`` and new, named."""
        inside = within(record.run_id, records, damaged, record.root_run_id)
        under = [r for r in cut_off(shown, records, inside) if r.run_id not in self.cut]
        self.cut.update(r.run_id for r in under)
        said(self.command, spared_once(self.damaged, inside), under)


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
