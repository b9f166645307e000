"""Archive, clean and delete finished runs now: the store's sweeper (`subagents prune`).

`subagents prune [--archive-after MIN] [--retention-days D] [--dry-run] [--json]`.

The same rules as the sweeper a runtime runs (docs/store.md, "The sweeper"), once, on the
store: finished runs that ended `--archive-after` minutes ago or more (default 60; 0: every
finished run) are archived (hidden from `ps` without `--all`; `info` still finds them), and
those whose cleanup is `delete` (their tree's choice: `run --cleanup`, a definition's
`cleanup`) lose their transcripts and events; runs archived `--retention-days` ago or more
are deleted whole (default: never). An infinite value (`inf`, or a number past the float
range, `1e999`) means never: `--archive-after inf` archives nothing. A run whose outcome
its requester has not been told is never deleted (reported as held). Unfinished runs are
never touched, so it is safe beside a runtime using the store. `--dry-run` says what it
would do and writes nothing.
"""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING

from subagents.cli.command import add_inspect_arguments, emit, reports_errors, store_errors
from subagents.cli.state import EXIT_USAGE, CliError, open_inspected_store

if TYPE_CHECKING:
    from subagents.store.sweep import SweepReport

NAME = "prune"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--archive-after",
        type=float,
        default=60.0,
        metavar="MIN",
        help="archive finished runs that ended MIN minutes ago or more (default 60; inf: never)",
    )
    parser.add_argument(
        "--retention-days",
        type=float,
        default=None,
        metavar="D",
        help="delete runs archived D days ago or more, whole (default or inf: keep them)",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="say what would be done; write nothing"
    )
    add_inspect_arguments(parser, run=False)


@reports_errors(NAME)
def run(args: argparse.Namespace) -> int:
    if not args.archive_after >= 0:
        raise CliError(
            f"--archive-after must be >= 0 minutes, got {args.archive_after}", EXIT_USAGE
        )
    if args.retention_days is not None and not args.retention_days >= 0:
        raise CliError(f"--retention-days must be >= 0, got {args.retention_days}", EXIT_USAGE)
    with open_inspected_store(args) as store, store_errors(store):
        sweep = getattr(store, "sweep", None)
        if sweep is None:
            raise CliError(
                "this store is swept by the process that serves it (a cluster's head runs"
                " its sweeper); prune a local store with --state"
            )
        report: SweepReport = sweep(
            now=time.time(),
            archive_after_minutes=args.archive_after,
            retention_days=args.retention_days,
            dry_run=args.dry_run,
        )
    return emit(args, report, lambda: _show(report, dry_run=args.dry_run))


def _show(report: SweepReport, *, dry_run: bool) -> None:
    from subagents.cli.output import printable

    archived, cleaned, deleted = len(report.archived), len(report.cleaned), len(report.deleted)
    purged = report.commands_purged
    if dry_run:
        print(
            f"would archive {archived} run(s) ({cleaned} with their transcripts and events"
            f" deleted), delete {deleted} archived run(s) whole, purge {purged} taken"
            " command(s); nothing written (--dry-run)"
        )
    else:
        print(
            f"archived {archived} run(s) ({cleaned} with their transcripts and events"
            f" deleted), deleted {deleted} archived run(s) whole, purged {purged} taken"
            " command(s)"
        )
    if report.held:
        shown = printable(", ".join(report.held[:5])) + (", ..." if len(report.held) > 5 else "")
        print(
            f"held {len(report.held)} run(s) due for deletion: their requester has not been"
            f" told their outcome yet ({shown})"
        )
