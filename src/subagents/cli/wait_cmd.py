"""Wait until a run ends and exit with its status code (`subagents wait RUN`).

Works from any terminal for any run in the store (a `run --detach` tree, a child, a run of a
`subagents run` in another terminal). Exit status: that of `subagents run` for the run's end
(0 completed, 1 failed, 3 timed_out, 4 cancelled, 5 budget_exceeded); 6 when its host process
is gone (the run is orphaned: `subagents resume` continues it); 124 when --timeout passed
first. RUN is an id, a unique prefix of one, or #N from `ps`.

A detached tree on a Ray cluster whose host Ray is starting again (its process died: the
run shows `restarting`) is waited for: its new process takes the tree up. Only when it has
been restarting for ``RESTART_WAIT_S`` does `wait` give up with 6 (docs/cluster.md).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING

from subagents.cli.command import (
    add_inspect_arguments,
    add_run_argument,
    inspecting,
    reports_errors,
)
from subagents.cli.state import (
    EXIT_FOR_STATUS,
    EXIT_ORPHANED,
    EXIT_USAGE,
    CliError,
    given_store,
)

if TYPE_CHECKING:
    from subagents.messages import RunRecord
    from subagents.store.leases import Liveness

NAME = "wait"
POLL_S = 0.2
EXIT_WAIT_TIMEOUT = 124
"""As `timeout(1)`: the run had not ended when --timeout passed."""
RESTART_WAIT_S = 300.0
"""How long a run whose host Ray is starting again is waited for before `wait` calls it
orphaned (a tree host's restart took 14-18 s on a loaded machine here)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_run_argument(parser)
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        metavar="S",
        help="give up after S seconds (exit 124); default: wait as long as it runs",
    )
    add_inspect_arguments(parser, run=False)


@reports_errors(NAME)
def run(args: argparse.Namespace) -> int:
    return _wait(args)


def _restarting(record: RunRecord, alive: Liveness, since: float | None) -> float | None:
    """Since when ``record``'s host has been restarting (said once on stderr), or None."""
    if not alive.restarting(record):
        return None
    if since is None:
        from subagents.cli import output

        sys.stderr.write(
            output.printable(
                f"subagents wait: run {record.run_id}'s host is being started again by Ray"
                f" ({alive.describe(record)}); waiting for it to take the run up\n"
            )
        )
        return time.monotonic()
    return since


def _wait(args: argparse.Namespace) -> int:
    from subagents.cli import output
    from subagents.cli.state import liveness

    if args.timeout is not None and not args.timeout >= 0:
        raise CliError(f"--timeout must be >= 0 seconds, got {args.timeout:g}", EXIT_USAGE)
    deadline = None if args.timeout is None else time.monotonic() + args.timeout
    restarting: float | None = None  # since when its host is being restarted
    with inspecting(args) as (store, _alive, record):
        while True:
            alive = liveness(store)  # before the run (state.liveness says why)
            current = store.get_run(record.run_id)
            if current is None:
                raise CliError(f"run {record.run_id} is no longer in the store")
            record = current
            if record.status.terminal:
                break
            restarting = _restarting(record, alive, restarting)
            if alive.orphaned(record):
                sys.stderr.write(
                    output.printable(
                        f"subagents wait: run {record.run_id} is orphaned: its host"
                        f" ({alive.describe(record)}) is gone; `subagents resume` continues it\n"
                    )
                )
                return EXIT_ORPHANED
            if restarting is not None and time.monotonic() - restarting >= RESTART_WAIT_S:
                sys.stderr.write(
                    output.printable(
                        f"subagents wait: run {record.run_id}'s host has been restarting for"
                        f" {RESTART_WAIT_S:g}s without taking it up; taken as orphaned\n"
                    )
                )
                return EXIT_ORPHANED
            if deadline is not None and time.monotonic() >= deadline:
                run = f"{record.run_id}{given_store(args)}"  # the store this wait read
                sys.stderr.write(
                    output.printable(
                        f"subagents wait: run {record.run_id} is still {record.status} after"
                        f" {args.timeout:g}s; it goes on (only the wait ended): `subagents attach"
                        f" {run}` watches it, `subagents stop {run}` ends it\n"
                    )
                )
                return EXIT_WAIT_TIMEOUT
            time.sleep(POLL_S)
    if args.json:
        output.print_json(
            {"run_id": record.run_id, "status": record.status, "outcome": record.outcome}
        )
    else:
        outcome = record.outcome
        detail = ""
        if outcome is not None:
            kind = outcome.error_kind
            said = f"{kind}: " if kind and kind != record.status.value else ""  # not twice
            detail = outcome.result or "" if outcome.ok else f"{said}{outcome.error}"
        print(output.printable(f"{record.run_id} {record.status}: {detail}".rstrip(": ")))
    return EXIT_FOR_STATUS.get(record.status, 1)
