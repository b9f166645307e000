"""The execution tree under a run: status, depth, time, steps, tokens (`subagents tree RUN`).

Each node shows its own tokens and, when it has children, its subtree's total; an unfinished
run whose host process is gone shows `orphaned` (`subagents resume` continues it), and one
waiting for an approval kept in the store names it, `waiting (approval ID)` (`subagents
approve ID` answers it; `--json`: the node's `approvals`). RUN may be any run of a tree
(give the root to see the whole tree): an id, a unique prefix, or #N from `ps`.
"""

from __future__ import annotations

import argparse

from subagents.cli import output
from subagents.cli.command import add_inspect_arguments, emit, inspecting, reports_errors
from subagents.cli.state import all_run_ids, short_ids
from subagents.cli.views import build_tree, render_tree, walk
from subagents.cli.waiting_asks import WaitingAsks
from subagents.messages import TreeNode

NAME = "tree"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_inspect_arguments(parser)


def load_tree(args: argparse.Namespace) -> tuple[TreeNode, list[str]]:
    with inspecting(args) as (store, alive, record):
        records = store.list_runs(root_run_id=record.root_run_id, include_archived=True)
        asks = WaitingAsks.read(store, record.root_run_id)
        universe = all_run_ids(store)
    return build_tree(record, records, alive, asks), universe


@reports_errors(NAME)
def run(args: argparse.Namespace) -> int:
    tree, universe = load_tree(args)
    return emit(args, tree, lambda: _show(tree, universe))


def _show(tree: TreeNode, universe: list[str]) -> None:
    shorts = short_ids([n.run_id for n in walk(tree)], universe)
    output.console().print(render_tree(tree, shorts))
