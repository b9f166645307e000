"""Continue an ended run with a new message (`subagents continue RUN TEXT`).

A new run of its agent going on with its conversation: a root run of the same agent
(``Runtime.continue_run``, docs/runtime.md "Continuing a run") whose conversation is RUN's as
it ended (completed, failed, timed out, cancelled, over budget), then TEXT. RUN's record is
left as it ended; the new one names it (`subagents info` shows `continues`). Continuing the
same run twice forks it. RUN is an id, a unique prefix of one, or #N from `ps`, in the store
--state names (a run another process finished included). Everything else is `subagents
run`'s: the live tree, --json, --detach (then `subagents attach`/`wait` the printed id),
--timeout, --budget, the runtime's options, and its exit status (1 when RUN is not in the
store, 2 when it has not ended).
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
    parser.set_defaults(ray=None)  # a local store's run: no --ray here


@reports_errors(NAME)
def run(args: argparse.Namespace) -> int:
    record = _ended_run(args)
    args.agent, args.continues = record.agent, record.run_id
    return run_cmd.run(args)


def _ended_run(args: argparse.Namespace) -> RunRecord:
    """The run RUN names, which must have ended (else ``CliError``, exit 2)."""
    from subagents.cli.state import open_store, resolve

    store = open_store(args.state)
    try:
        with store_errors():
            record = resolve(store, args.run_ref)
    finally:
        store.close()
    if not record.status.terminal:
        raise CliError(
            f"run {record.run_id} is {record.status.value}: only an ended run can be continued"
            f" (`subagents wait {record.run_id}`, or `subagents stop {record.run_id}`)",
            EXIT_USAGE,
        )
    return record
