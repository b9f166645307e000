"""The execution tree under a run: status, depth, time, steps, tokens (`subagents tree RUN`).

Each node shows its own tokens and, when it has children, its subtree's total; an unfinished
run whose host process is gone shows `orphaned` (`subagents resume` continues it), and one
waiting for an approval kept in the store names it, `waiting (approval ID)` (`subagents
approve ID` answers it; `--json`: the node's `approvals`). RUN may be any run of a tree
(give the root to see the whole tree): an id, a unique prefix, or #N from `ps`. A row of the
tree that no longer reads (hand-edited: ``store.base.DamagedRow``) is left out, the rest
shown, and named on stderr (exit 1), as `ps` does (cli/damaged.py); so are the runs under it,
each named with the command that shows its own subtree. Only damage under RUN is named (and
fails the view): a damaged row elsewhere in its tree is not in what is shown.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from subagents.cli import output
from subagents.cli.command import add_inspect_arguments, emit, inspecting, reports_errors
from subagents.cli.damaged import cut_off, said, within
from subagents.cli.state import all_run_ids, short_ids
from subagents.cli.views import build_tree, render_tree, walk
from subagents.cli.waiting_asks import WaitingAsks
from subagents.messages import RunRecord, TreeNode

if TYPE_CHECKING:
    from subagents.store.base import DamagedRow

NAME = "tree"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_inspect_arguments(parser)


def load_tree(
    args: argparse.Namespace, damaged: list[DamagedRow] | None = None
) -> tuple[TreeNode, list[str], list[RunRecord]]:
    """The tree under ``args.run_ref``, every run's id, and the runs of the tree under a
    damaged row (``damaged``: a row under that run that does not read is left out and named
    there, one elsewhere in its tree not at all, ``damaged.within``; else it raises)."""
    met: list[DamagedRow] | None = None if damaged is None else []
    with inspecting(args) as (store, alive, record):
        records = store.list_runs(
            root_run_id=record.root_run_id, include_archived=True, damaged=met
        )
        asks = WaitingAsks.read(store, record.root_run_id, met)
        universe = all_run_ids(store)
    tree = build_tree(record, records, alive, asks)
    if damaged is None or not met:
        return tree, universe, []
    damaged.extend(within(record.run_id, records, met, record.root_run_id))
    return tree, universe, cut_off({n.run_id for n in walk(tree)}, records, damaged)


@reports_errors(NAME)
def run(args: argparse.Namespace) -> int:
    damaged: list[DamagedRow] = []  # (named after the tree: exit 1)
    tree, universe, under = load_tree(args, damaged)
    emit(args, tree, lambda: _show(tree, universe))
    return said(NAME, damaged, under)


def _show(tree: TreeNode, universe: list[str]) -> None:
    shorts = short_ids([n.run_id for n in walk(tree)], universe)
    output.console().print(render_tree(tree, shorts))
