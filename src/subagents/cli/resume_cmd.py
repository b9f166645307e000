"""Restore and continue the store's unfinished runs (`subagents resume`).

Runs left queued, running or waiting (the process hosting them died or was interrupted) are
taken up: running ones resume from their last checkpoint (no step is taken twice), queued
ones queue again, outcomes not yet delivered are delivered. Give the same --agents folders
(and model options) as the original `subagents run`: a run whose agent is not defined fails.
--list only lists what would be resumed. Do not resume while the original process still
runs: both would work on the same runs.

Exit status: 0 when every resumed root run completed (or nothing was unfinished), otherwise
the exit code of `subagents run` for the first root that did not complete.
"""

from __future__ import annotations

import argparse
import sys
import threading

import msgspec

from subagents.cli import output
from subagents.cli.runtime_args import Hosted, add_runtime_arguments, start_runtime
from subagents.cli.state import (
    EXIT_FOR_STATUS,
    LIVE_STATUSES,
    CliError,
    fail,
    open_store,
)
from subagents.messages import Outcome, RunRecord
from subagents.store.base import StoreError

NAME = "resume"


class Unfinished(msgspec.Struct, frozen=True):
    run_id: str
    agent: str
    status: str
    depth: int
    root_run_id: str


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--list", action="store_true", help="only list the unfinished runs; resume nothing"
    )
    add_runtime_arguments(parser)


def run(args: argparse.Namespace) -> int:
    try:
        pending = unfinished(args)
        if args.list or not pending:
            _print_pending(pending, as_json=args.json)
            return 0
        hosted = start_runtime(args, restore=True)
    except CliError as exc:
        return fail(NAME, exc)
    try:
        return _resume(args, hosted)
    except CliError as exc:
        return fail(NAME, exc)
    finally:
        hosted.close()


def unfinished(args: argparse.Namespace) -> list[RunRecord]:
    with open_store(args.state) as store:
        try:
            return store.list_runs(statuses=LIVE_STATUSES)
        except StoreError as exc:
            raise CliError(str(exc)) from exc


def _print_pending(pending: list[RunRecord], *, as_json: bool) -> None:
    rows = [Unfinished(r.run_id, r.agent, str(r.status), r.depth, r.root_run_id) for r in pending]
    if as_json:
        output.print_json({"unfinished": rows})
        return
    if not rows:
        print("nothing to resume: no unfinished runs")
        return
    output.print_table(
        ("RUN", "AGENT", "STATUS", "DEPTH", "ROOT"),
        [(r.run_id, r.agent, r.status, str(r.depth), r.root_run_id) for r in rows],
    )


def _resume(args: argparse.Namespace, hosted: Hosted) -> int:
    from subagents.cli.live import LiveTree, watch
    from subagents.cli.summary import print_outcome

    rt = hosted.runtime
    report = rt.restore_report
    tree = LiveTree()
    roots = list(dict.fromkeys(report.orphans))
    for root in roots:
        tree.seed(rt.runs(root_run_id=root))
    rt.subscribe(tree.on_event)
    handles = []
    for root in roots:
        try:
            handles.append(rt.attach(root))
        except LookupError as exc:
            sys.stderr.write(f"subagents resume: {exc}\n")
    sys.stderr.write(
        f"subagents resume: {len(report.resumed)} run(s) resumed, {len(report.requeued)}"
        f" queued again, {len(report.failed)} failed, {len(report.cancelled)} cancelled;"
        f" waiting for {len(handles)} root run(s)\n"
    )
    done = threading.Event()

    def wait_all() -> None:
        for handle in handles:
            handle.result()
        done.set()

    threading.Thread(target=wait_all, name="resume-waiter", daemon=True).start()
    out = output.console()
    if args.json:
        done.wait()
    else:
        watch(tree, done, out, approvals=hosted.approvals)
    outcomes: list[Outcome] = [h.result(timeout=0) for h in handles]
    if args.json:
        runs = [r for h in handles for r in rt.runs(root_run_id=h.run_id)]
        output.print_json(
            {
                "resumed": report.resumed,
                "requeued": report.requeued,
                "failed": report.failed,
                "cancelled": report.cancelled,
                "outcomes": outcomes,
                "runs": runs,
            }
        )
    else:
        for handle, outcome in zip(handles, outcomes, strict=True):
            print_outcome(out, outcome, rt.runs(root_run_id=handle.run_id))
    for outcome in outcomes:
        if not outcome.ok:
            return EXIT_FOR_STATUS.get(outcome.status, 1)
    return 0
