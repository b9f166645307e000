"""List runs from the store: live ones, or all with --all (`subagents ps`).

Rows are numbered: `#N` names row N of the last plain `ps` (not `--json`) in the other
commands (`subagents log '#2'`). Run ids are shown by their shortest unique suffix (at least
8 characters), as every view shows them; any unique prefix or suffix works wherever a run id
is asked for. A run whose host
process is gone (its lease lapsed: killed, crashed) shows `orphaned`; `subagents resume`
continues it. Filters: --status (repeatable or comma-separated; `orphaned` too), --root RUN
(the tree of that run), --agent NAME, --label TEXT (`run --label`), --requester RUN (the
children RUN started); --watch keeps the listing open and prints a row each time a run
changes, as `kubectl get -w` does.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from subagents.cli import output
from subagents.cli.command import add_inspect_arguments, emit, reports_errors, store_errors
from subagents.cli.damaged import read_sparing, said, spared_once
from subagents.cli.state import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    ORPHANED,
    RESTARTING,
    CliError,
    all_run_ids,
    live_statuses,
    liveness,
    open_inspected_store,
    remember_listing,
    resolve,
    short_ids,
    utf8_text,
)
from subagents.cli.views import age, duration, one_line
from subagents.cli.waiting_asks import HINT, WaitingAsks, with_approvals
from subagents.messages import RunRecord, RunStatus
from subagents.store.leases import Liveness

if TYPE_CHECKING:
    from subagents.cli.state import InspectedStore
    from subagents.store.base import DamagedRow

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
    label: str | None
    orphaned: bool
    """Unfinished, and its host is gone (its lease lapsed): `subagents resume` continues it."""
    host: str
    """The process hosting (or that hosted) the run: ``host pid N``."""
    restarting: bool = False
    """Unfinished, its host's process gone, and Ray starting that host again (a detached
    tree's on a cluster): it takes the run up."""
    node: str | None = None
    """On a Ray cluster: the node (Ray's node id) its latest start was placed on."""
    continues: str | None = None
    """The ended run whose conversation it went on with (`subagents continue`)."""
    detached: bool = False
    """Spawned with ``detach``: it outlives its parent (``parent_run_id``, who started it)."""
    started_by: str | None = None
    """A detached run's parent as people name it: ``AGENT RUN_ID`` (its parent may have
    ended; it still started it)."""
    approvals: tuple[str, ...] = ()
    """The ids of the approvals kept in the store it waits for (`subagents approve ID`)."""
    model: str | None = None
    """The model it asks for."""
    answered_by: str | None = None
    """What answered it when not that model: ``scripted``, the offline model."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--status",
        action="append",
        default=[],
        metavar="S",
        help="only runs with this status (repeatable, or comma-separated): "
        + ", ".join([*(s.value for s in RunStatus), ORPHANED]),
    )
    parser.add_argument("--root", metavar="RUN", help="only the tree of RUN")
    parser.add_argument("--agent", metavar="NAME", help="only runs of this agent")
    parser.add_argument(
        "--label",
        action="append",
        default=[],
        metavar="TEXT",
        help="only runs with this label (`run --label`; repeatable: any of them)",
    )
    parser.add_argument(
        "--requester",
        metavar="RUN",
        help="only the runs RUN requested (its children)",
    )
    parser.add_argument("-a", "--all", action="store_true", help="finished (and archived) runs too")
    parser.add_argument(
        "-n", "--limit", type=int, default=None, metavar="N", help="only the N most recent"
    )
    parser.add_argument(
        "-w",
        "--watch",
        action="store_true",
        help="after the listing, print a row each time a run listed or asked for changes"
        " (as `kubectl get -w`), until interrupted",
    )
    add_inspect_arguments(parser, run=False)


def parse_statuses(values: list[str]) -> tuple[list[RunStatus] | None, bool]:
    """The stored statuses asked for (None: any), and whether orphaned runs are asked for."""
    if not values:
        return None, False
    wanted: list[RunStatus] = []
    orphaned = False
    for value in values:
        for word in value.split(","):
            word = word.strip().lower().replace("-", "_")
            if not word:
                continue
            if word == ORPHANED:
                orphaned = True
                continue
            try:
                wanted.append(RunStatus(word))
            except ValueError:
                known = ", ".join([*(s.value for s in RunStatus), ORPHANED])
                message = f"--status {word!r}: unknown status; use one of {known}"
                raise CliError(message, EXIT_USAGE) from None
    return wanted, orphaned


class Selection(msgspec.Struct, frozen=True, kw_only=True):
    """The runs a listing asks for, from its options: what the store filters (statuses,
    tree, agent) and what is decided here per record (labels, requester, orphaned)."""

    statuses: list[RunStatus] | None
    asked: frozenset[RunStatus]
    """The stored statuses named with --status (beside ``orphaned``)."""
    orphaned: bool
    root: str | None
    requester: str | None
    agent: str | None
    labels: frozenset[str]
    archived: bool

    def listed(
        self, store: InspectedStore, alive: Liveness, damaged: list[DamagedRow] | None = None
    ) -> list[RunRecord]:
        """``damaged``: a record that does not read is left out and named there (``ps``);
        else it raises (the watch)."""
        records = store.list_runs(
            statuses=self.statuses,
            root_run_id=self.root,
            agent=self.agent,
            include_archived=self.archived,
            damaged=damaged,
        )
        return [r for r in records if self.matches(r, alive, status=False)]

    def matches(self, record: RunRecord, alive: Liveness, *, status: bool = True) -> bool:
        """Whether ``record`` is one of the runs asked for (``status``: its status checked
        too, as the store does for ``list``)."""
        if status and self.statuses is not None and record.status not in self.statuses:
            return False
        if self.orphaned and not (alive.orphaned(record) or record.status in self.asked):
            return False
        return (
            (self.root is None or record.root_run_id == self.root)
            and (self.requester is None or record.parent_run_id == self.requester)
            and (self.agent is None or record.agent == self.agent)
            and (not self.labels or record.label in self.labels)
        )


def selection(args: argparse.Namespace, store: InspectedStore) -> Selection:
    """The options of ``ps`` read into a ``Selection`` (RUN references resolved)."""
    statuses, orphaned = parse_statuses(args.status)
    asked = frozenset(statuses or ())
    if orphaned:  # orphans are unfinished runs; the stored statuses asked for are ORed in
        statuses = [*(statuses or ()), *live_statuses()]
    if statuses is None and not args.all:
        statuses = list(live_statuses())
    root = resolve(store, args.root).root_run_id if args.root else None
    requester = resolve(store, args.requester) if args.requester else None
    return Selection(
        statuses=statuses,
        asked=asked,
        orphaned=orphaned,
        root=requester.root_run_id if requester is not None else root,
        requester=requester.run_id if requester is not None else None,
        agent=args.agent,
        labels=frozenset(args.label),
        archived=args.all,
    )


@reports_errors(NAME)
def run(args: argparse.Namespace) -> int:
    if args.limit is not None and args.limit < 1:
        raise CliError(f"--limit must be a positive number, got {args.limit}", EXIT_USAGE)
    parse_statuses(args.status)  # a bad --status is a usage error before the store is opened
    if args.agent is not None:  # argv's bad bytes: the store's look-up raised a traceback
        utf8_text(args.agent, "--agent")
    for label in args.label:
        utf8_text(label, "--label")
    with open_inspected_store(args) as store, store_errors(store):
        chosen = selection(args, store)
        seq = store.last_event_seq() if args.watch else 0  # what the watch follows from
        alive = liveness(store)
        damaged: list[DamagedRow] = []  # (shown after the listing, naming each: exit 1)
        records = chosen.listed(store, alive, damaged)
        if args.limit is not None:
            records = records[-args.limit :]
        if not args.json:  # #N means what a person read, not what a script asked for
            remember_listing(store, [r.run_id for r in records])
        universe = all_run_ids(store) if records else []
        starters = _starters(store, records, damaged)
        asks = WaitingAsks.read(store, damaged=damaged) if records else WaitingAsks()  # (once)
        rows = [
            ps_row(n, r, alive, starters.get(r.run_id), asks.ids(r.run_id))
            for n, r in enumerate(records, 1)
        ]
        emit(args, rows, lambda: _show(args, rows, records, universe))
        failed = said(NAME, damaged)  # (a watch names them now and goes on: exit 1 at its end)
        if not args.watch:
            return failed
        from subagents.cli.ps_watch import watch

        json_row = (
            (lambda r, a: ps_row(0, r, a, None, _asks_of(store, r, damaged))) if args.json else None
        )
        code = watch(
            store, chosen, after=seq, shown=records, alive=alive, json_row=json_row, damaged=damaged
        )
        return code or (EXIT_FAILED if damaged else EXIT_OK)


def _show(
    args: argparse.Namespace, rows: list[PsRow], records: list[RunRecord], universe: list[str]
) -> None:
    if not rows:
        hint = "" if args.all or args.status else "; `subagents ps --all` lists finished runs too"
        sys.stderr.write(f"no runs{hint}\n")
        return
    parents = [p for r in records for p in (r.parent_run_id, r.continues) if p is not None]
    shorts = short_ids([r.run_id for r in records] + parents, universe)
    now = time.time()
    print_table = with_nodes(output.print_table, [r.node for r in rows])
    print_table = with_approvals(print_table, [r.approvals for r in rows])
    print_table(
        (
            "#",
            "RUN",
            "AGENT",
            "STATUS",
            "DEPTH",
            "PARENT",
            "AGE",
            "TIME",
            "STEPS",
            "TOKENS",
            "LABEL",
            "TASK",
        ),
        [
            (
                str(row.row),
                shorts[row.run_id],
                row.agent,
                RESTARTING if row.restarting else ORPHANED if row.orphaned else str(row.status),
                str(row.depth),
                _parent(row.parent_run_id, shorts, row.continues, row.detached),
                age(row.created_at, now),
                duration(record, now),
                str(row.steps),
                str(row.tokens),
                one_line(row.label, LABEL_WIDTH) or "-",
                one_line(row.task, TASK_WIDTH),
            )
            for row, record in zip(rows, records, strict=True)
        ],
        wide=("TASK",),
    )
    _explain(rows)


def _explain(rows: list[PsRow]) -> None:
    """One line on stderr for each kind of mark the listing shows, saying what it means."""
    if any(row.restarting for row in rows):
        sys.stderr.write(
            "restarting: the run's host process died and Ray is starting it again;"
            " it takes the run up (`subagents wait` waits for it)\n"
        )
    if any(row.detached for row in rows):
        sys.stderr.write(
            "det PARENT: a detached run (spawned with detach): PARENT started it, and it goes"
            " on after PARENT ends\n"
        )
    if any(row.approvals for row in rows):
        sys.stderr.write(HINT + "\n")
    if any(row.orphaned for row in rows):
        sys.stderr.write(
            "orphaned: the process hosting the run is gone (its lease lapsed);"
            " `subagents resume` continues it\n"
        )


def with_nodes(print_table: Any, nodes: list[str | None]) -> Any:
    """``print_table`` with a NODE column after STATUS when any run is on a cluster's node
    (the first 12 characters of Ray's node id, as `ray list nodes` shows it)."""
    if not any(nodes):
        return print_table

    def printed(headers: Sequence[str], rows: Sequence[Sequence[str]], **kw: Any) -> None:
        at = list(headers).index("STATUS") + 1
        cells = [(node or "-")[:12] for node in nodes]
        print_table(
            [*headers[:at], "NODE", *headers[at:]],
            [[*row[:at], cell, *row[at:]] for row, cell in zip(rows, cells, strict=True)],
            **kw,
        )

    return printed


def _parent(
    parent: str | None, shorts: dict[str, str], continues: str | None = None, detached: bool = False
) -> str:
    """The PARENT cell: its parent's short id; a root that continues a run: ``cont RUN``; a
    detached run: ``det PARENT``."""
    if parent is None:
        return "-" if continues is None else f"cont {shorts.get(continues, continues[:8])}"
    return f"det {shorts.get(parent, parent[:8])}" if detached else shorts.get(parent, parent[:8])


def _starters(
    store: InspectedStore, records: list[RunRecord], damaged: list[DamagedRow]
) -> dict[str, str]:
    """Who started each detached run listed (``AGENT RUN_ID`` of its parent), by run id."""
    out: dict[str, str] = {}
    for r in records:
        if r.detached and r.parent_run_id is not None:
            parent = read_sparing(store, r.parent_run_id, damaged)
            agent = parent.agent if parent is not None else "?"
            out[r.run_id] = f"{agent} {r.parent_run_id}"
    return out


TASK_WIDTH = 48
LABEL_WIDTH = 20


def _asks_of(
    store: InspectedStore, record: RunRecord, damaged: list[DamagedRow]
) -> tuple[str, ...]:
    """A watched row's pending approvals (one read per changed row, as the row is); a
    damaged approvals row left out, named the first time it is met."""
    met: list[DamagedRow] = []
    asks = WaitingAsks(store.list_approvals(run_id=record.run_id, damaged=met))
    said(NAME, spared_once(damaged, met))
    return asks.ids(record.run_id)


def ps_row(
    n: int,
    r: RunRecord,
    alive: Liveness,
    started_by: str | None = None,
    approvals: tuple[str, ...] = (),
) -> PsRow:
    """Row ``n`` of a listing: the record as `ps --json` prints it."""
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
        label=r.label,
        orphaned=alive.orphaned(r),
        host=alive.host(r),
        restarting=alive.restarting(r),
        node=r.node,
        continues=r.continues,
        detached=r.detached,
        started_by=started_by,
        approvals=approvals,
        model=r.model,
        answered_by=r.answered_by,
    )
