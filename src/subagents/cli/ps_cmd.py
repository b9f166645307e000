"""List runs from the store: live ones, or all with --all (`subagents ps`).

Rows are numbered: `#N` names row N of this listing in the other commands (`subagents log #2`).
Run ids are shown by their shortest unique prefix (at least 8 characters); any unique prefix
works wherever a run id is asked for. Filters: --status (repeatable or comma-separated),
--root RUN (the tree of that run), --agent NAME.
"""

from __future__ import annotations

import argparse
import sys
import time

import msgspec

from subagents.cli import output
from subagents.cli.state import (
    EXIT_USAGE,
    LIVE_STATUSES,
    CliError,
    add_json_argument,
    add_state_argument,
    all_run_ids,
    fail,
    open_store,
    remember_listing,
    resolve,
    short_ids,
)
from subagents.cli.views import age
from subagents.messages import RunRecord, RunStatus
from subagents.store.base import StoreError

NAME = "ps"


class PsRow(msgspec.Struct, frozen=True, kw_only=True):
    """One row as `--json` prints it (``row`` is what ``#N`` refers to)."""

    row: int
    run_id: str
    agent: str
    status: RunStatus
    depth: int
    parent_run_id: str | None
    root_run_id: str
    created_at: float
    started_at: float | None
    ended_at: float | None
    steps: int
    tokens: int
    cost_usd: float
    task: str


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--status",
        action="append",
        default=[],
        metavar="S",
        help="only runs with this status (repeatable, or comma-separated): "
        + ", ".join(s.value for s in RunStatus),
    )
    parser.add_argument("--root", metavar="RUN", help="only the tree of RUN")
    parser.add_argument("--agent", metavar="NAME", help="only runs of this agent")
    parser.add_argument("-a", "--all", action="store_true", help="finished (and archived) runs too")
    parser.add_argument(
        "-n", "--limit", type=int, default=None, metavar="N", help="only the N most recent"
    )
    add_json_argument(parser)
    add_state_argument(parser)


def parse_statuses(values: list[str]) -> list[RunStatus] | None:
    if not values:
        return None
    wanted: list[RunStatus] = []
    for value in values:
        for word in value.split(","):
            word = word.strip().lower().replace("-", "_")
            if not word:
                continue
            try:
                wanted.append(RunStatus(word))
            except ValueError:
                known = ", ".join(s.value for s in RunStatus)
                message = f"--status {word!r}: unknown status; use one of {known}"
                raise CliError(message, EXIT_USAGE) from None
    return wanted


def run(args: argparse.Namespace) -> int:
    try:
        return _run(args)
    except CliError as exc:
        return fail(NAME, exc)


def _run(args: argparse.Namespace) -> int:
    if args.limit is not None and args.limit < 1:
        raise CliError(f"--limit must be a positive number, got {args.limit}", EXIT_USAGE)
    statuses = parse_statuses(args.status)
    if statuses is None and not args.all:
        statuses = list(LIVE_STATUSES)
    with open_store(args.state) as store:
        root = resolve(store, args.root).root_run_id if args.root else None
        try:
            records = store.list_runs(
                statuses=statuses,
                root_run_id=root,
                agent=args.agent,
                include_archived=args.all,
            )
        except StoreError as exc:
            raise CliError(str(exc)) from exc
        if args.limit is not None:
            records = records[-args.limit :]
        remember_listing(store, [r.run_id for r in records])
        universe = all_run_ids(store) if records else []
    rows = [_row(n, r) for n, r in enumerate(records, 1)]
    if args.json:
        output.print_json(rows)
        return 0
    if not rows:
        hint = "" if args.all or args.status else "; `subagents ps --all` lists finished runs too"
        sys.stderr.write(f"no runs{hint}\n")
        return 0
    parents = [r.parent_run_id for r in records if r.parent_run_id is not None]
    shorts = short_ids([r.run_id for r in records] + parents, universe)
    now = time.time()
    output.print_table(
        ("#", "RUN", "AGENT", "STATUS", "DEPTH", "PARENT", "AGE", "STEPS", "TOKENS"),
        [
            (
                str(row.row),
                shorts[row.run_id],
                row.agent,
                str(row.status),
                str(row.depth),
                _parent(row.parent_run_id, shorts),
                age(row.created_at, now),
                str(row.steps),
                str(row.tokens),
            )
            for row in rows
        ],
    )
    return 0


def _parent(parent: str | None, shorts: dict[str, str]) -> str:
    if parent is None:
        return "-"
    return shorts.get(parent, parent[:8])


def _row(n: int, r: RunRecord) -> PsRow:
    return PsRow(
        row=n,
        run_id=r.run_id,
        agent=r.agent,
        status=r.status,
        depth=r.depth,
        parent_run_id=r.parent_run_id,
        root_run_id=r.root_run_id,
        created_at=r.created_at,
        started_at=r.started_at,
        ended_at=r.ended_at,
        steps=r.steps,
        tokens=r.usage.total_tokens,
        cost_usd=r.usage.cost_usd,
        task=r.task,
    )
