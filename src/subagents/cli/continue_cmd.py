"""Continue an ended run with a new message (`subagents continue RUN TEXT`).

A new run of its agent going on with its conversation: a root run of the same agent
(``Runtime.continue_run``, docs/runtime.md "Continuing a run") whose conversation is RUN's as
it ended (completed, failed, timed out, cancelled, over budget), then TEXT. RUN's record is
left as it ended; the new one names it (`subagents info` shows `continues`). Continuing the
same run twice forks it. RUN is an id, a unique prefix of one, or #N from `ps`, in the store
--state names, or a Ray cluster's (--ray ADDRESS, $SUBAGENTS_RAY_ADDRESS: the new tree is
then hosted on the cluster's nodes, as `run --ray` hosts one). Everything else is `subagents
run`'s: the live tree, --json, --detach (then `subagents attach`/`wait` the printed id; not
on a cluster yet), --timeout, --budget, the runtime's options, and its exit status (1 when
RUN is not in the store, 2 when it has not ended).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from subagents.cli import run_cmd
from subagents.cli.command import RUN_HELP, reports_errors, store_errors
from subagents.cli.state import EXIT_USAGE, CliError

if TYPE_CHECKING:
    from subagents.messages import RunRecord

NAME = "continue"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_ref", metavar="RUN", help=f"the run to continue: {RUN_HELP}")
    parser.add_argument("task", metavar="TEXT", help="what to say next (- reads it from stdin)")
    run_cmd.add_run_options(parser)
    run_cmd.add_ray_option(parser)


@reports_errors(NAME)
def run(args: argparse.Namespace) -> int:
    _check_cluster(args)
    record = _ended_run(args)
    args.agent, args.continues = record.agent, record.run_id
    return run_cmd.run(args)


def _ended_run(args: argparse.Namespace) -> RunRecord:
    """The run RUN names, which must have ended (else ``CliError``, exit 2: what to do, an
    orphaned run's told apart: waiting for it would never end, as nothing hosts it)."""
    from subagents.cli.state import liveness, open_inspected_store, resolve

    store = open_inspected_store(args)  # the file --state names, or the cluster's (--ray)
    try:
        with store_errors(store):
            alive = liveness(store)  # (read before the run: ``state.liveness``)
            record = resolve(store, args.run_ref)
    finally:
        store.close()
    if not record.status.terminal and alive.orphaned(record):
        rid = record.run_id
        raise CliError(
            f"run {rid} is orphaned (its host is gone; it was {record.status.value}): only an"
            f" ended run can be continued. `subagents resume {rid}` takes its tree up again"
            f" (continue it once it has ended), or `subagents stop {rid}` ends it now (then"
            f" `subagents continue {rid} TEXT`)",
            EXIT_USAGE,
        )
    if not record.status.terminal:
        raise CliError(
            f"run {record.run_id} is {record.status.value}: only an ended run can be continued"
            f" (`subagents wait {record.run_id}`, or `subagents stop {record.run_id}`)",
            EXIT_USAGE,
        )
    return record


def _check_cluster(args: argparse.Namespace) -> None:
    """On a cluster (``--ray``, ``$SUBAGENTS_RAY_ADDRESS``) a continued tree is hosted by this
    command's runtime, as `run --ray` hosts one; ``--detach`` there is refused: a detached
    tree on a cluster is a tree host actor on its head (``runtime.start_detached``), which
    starts a new run from an agent and a task and cannot yet take a continuation."""
    from subagents.cli.runtime_args import cluster_from

    address = cluster_from(args)
    if args.detach and address is not None:
        raise CliError(
            f"--detach on the Ray cluster {address}: a continued tree cannot be hosted by a"
            " detached tree host yet (it starts new runs only); run `subagents continue"
            " --ray` in the foreground (under nohup or tmux to outlive the terminal), or"
            " `subagents run --detach --ray` for a new run",
            EXIT_USAGE,
        )
