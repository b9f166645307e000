"""The execution tree under a run: status, depth, time, steps, tokens (`subagents tree RUN`).

Each node shows its own tokens and, when it has children, its subtree's total; an unfinished
run whose host process is gone shows `orphaned` (`subagents resume` continues it). RUN may be any
run of a tree (give the root to see the whole tree): an id, a unique prefix, or #N from `ps`.
"""

from __future__ import annotations

import argparse

from subagents.cli import output
from subagents.cli.state import (
    CliError,
    add_json_argument,
    add_store_arguments,
    all_run_ids,
    fail,
    liveness,
    open_inspected_store,
    resolve,
    short_ids,
)
from subagents.cli.views import build_tree, render_tree, walk
from subagents.messages import TreeNode
from subagents.store.base import StoreError

NAME = "tree"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_ref", metavar="RUN", help="run id, unique prefix, or #N")
    add_json_argument(parser)
    add_store_arguments(parser)


def load_tree(args: argparse.Namespace) -> tuple[TreeNode, list[str]]:
    with open_inspected_store(args) as store:
        alive = liveness(store)  # before the runs (state.liveness says why)
        record = resolve(store, args.run_ref)
        try:
            records = store.list_runs(root_run_id=record.root_run_id, include_archived=True)
        except StoreError as exc:
            raise CliError(str(exc)) from exc
        universe = all_run_ids(store)
    return build_tree(record, records, alive), universe


def run(args: argparse.Namespace) -> int:
    try:
        tree, universe = load_tree(args)
    except CliError as exc:
        return fail(NAME, exc)
    if args.json:
        output.print_json(tree)
        return 0
    shorts = short_ids([n.run_id for n in walk(tree)], universe)
    output.console().print(render_tree(tree, shorts))
    return 0
