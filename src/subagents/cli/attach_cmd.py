"""Watch a run's tree live from any terminal, until it ends (`subagents attach RUN`).

The tree under RUN (status, depth, time, steps, tokens, result or error) is read from the store
a few times a second, so it works for any run: a `run --detach` tree, one running in another
terminal, a child. On a terminal it redraws in place; on a pipe it prints one line per change
of status, then the tree. A run waiting for an approval kept in the store shows
`waiting (approval ID)` (`subagents approve ID` answers it). When RUN ends it prints its
result and one line per run, and exits with `subagents run`'s code for its status. Ctrl-C
detaches (exit 0): the run goes on. When the run's host process is gone (orphaned) it says so
and exits 6 (`subagents resume` continues it). RUN is an id, a unique prefix of one, or #N
from `ps`. A row of the tree that no longer reads (a child's, an approval's: hand-edited,
``store.base.DamagedRow``) is left out, the rest followed, and named on stderr when first
met, as is each run cut off under a damaged run (not reached through its parent: `subagents
attach` or `tree` of it shows it); the exit is then 1 if the run's own would be 0 (as `ps`
does: cli/damaged.py). Only damage under RUN is named: a damaged row elsewhere in its tree is
not followed. RUN's own row damaged while watched ends the watch with an error naming it
(exit 1).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING

from subagents.cli.command import add_inspect_arguments, reports_errors, store_errors
from subagents.cli.state import (
    EXIT_FAILED,
    EXIT_FOR_STATUS,
    EXIT_OK,
    EXIT_ORPHANED,
    CliError,
    short_id,
)

if TYPE_CHECKING:
    from rich.console import Console, RenderableType

    from subagents.cli.damaged import Sighted
    from subagents.cli.state import InspectedStore
    from subagents.cli.waiting_asks import WaitingAsks
    from subagents.messages import RunRecord
    from subagents.store.base import DamagedRow
    from subagents.store.leases import Liveness

NAME = "attach"
POLL_S = 0.25


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_inspect_arguments(parser, json=False)


def run(args: argparse.Namespace) -> int:
    try:
        return _attach(args)
    except KeyboardInterrupt:
        sys.stderr.write(
            f"subagents attach: detached from {args.run_ref}; it goes on (`subagents attach"
            f" {args.run_ref}` again, `subagents wait {args.run_ref}` for its end)\n"
        )
        return EXIT_OK


@reports_errors(NAME)
def _attach(args: argparse.Namespace) -> int:
    from subagents.cli.damaged import Sighted
    from subagents.cli.output import console
    from subagents.cli.state import open_inspected_store, resolve

    out = console()
    sighted = Sighted(NAME)  # (each damaged row named when first met: exit 1 at the end)
    with open_inspected_store(args) as store:
        record = resolve(store, args.run_ref)
        if out.is_terminal:
            record, orphaned = _live_view(store, record, out, sighted)
        else:
            record, orphaned = _journal(store, record, out, sighted)
        code = _end(store, record, orphaned, out, sighted)
        return code or (EXIT_FAILED if sighted.damaged else EXIT_OK)


def _subtree(
    store: InspectedStore, record: RunRecord, sighted: Sighted
) -> tuple[list[RunRecord], Liveness, WaitingAsks]:
    """The runs under ``record`` (itself first, parents before children), the leases and
    the tree's pending approvals (one read each per frame); a row that does not read is
    left out and named the first time it is met (``sighted``: those under ``record``,
    and the runs cut off under them), unless it is ``record``'s own: then nothing is left
    to follow (``CliError`` naming it).

    The leases are read first: a host ends its runs before it gives up its lease, so runs
    read after the leases are never taken for orphans of a host that ended in between."""
    from subagents.cli.damaged import a_run
    from subagents.cli.state import liveness
    from subagents.cli.waiting_asks import WaitingAsks

    alive = liveness(store)
    met: list[DamagedRow] = []  # (this read's)
    with store_errors():
        tree = store.list_runs(root_run_id=record.root_run_id, include_archived=True, damaged=met)
        asks = WaitingAsks.read(store, record.root_run_id, met)
    for exc in met:
        if a_run(exc) and exc.key == record.run_id:
            raise CliError(str(exc))
    children: dict[str | None, list[RunRecord]] = {}
    for r in tree:
        children.setdefault(r.parent_run_id, []).append(r)
    by_id = {r.run_id: r for r in tree}
    ordered: list[RunRecord] = []
    stack = [by_id.get(record.run_id, record)]
    while stack:
        r = stack.pop()
        ordered.append(r)
        stack.extend(reversed(children.get(r.run_id, [])))
    if met:
        sighted.met(record, tree, {r.run_id for r in ordered}, met)
    return ordered, alive, asks


def _live_view(
    store: InspectedStore, record: RunRecord, out: Console, sighted: Sighted
) -> tuple[RunRecord, bool]:
    """Redraw the tree in place until RUN ends or is orphaned."""
    from rich.live import Live

    from subagents.cli.state import all_run_ids, short_ids
    from subagents.cli.views import build_tree, render_tree, walk

    def frame() -> tuple[RenderableType, RunRecord, bool]:
        runs, alive, asks = _subtree(store, record, sighted)
        tree = build_tree(runs[0], runs, alive, asks)
        shorts = short_ids([n.run_id for n in walk(tree)], all_run_ids(store))
        with store_errors():  # what their models are writing now (the store's previews)
            live = [r.run_id for r in runs if not r.status.terminal]
            writing = {r: p.text for r, p in store.previews(live).items()}
        return render_tree(tree, shorts, writing=writing), runs[0], alive.orphaned(runs[0])

    view, current, orphaned = frame()
    with Live(view, console=out, refresh_per_second=4, transient=False) as live:
        while not current.status.terminal and not orphaned:
            time.sleep(POLL_S)
            view, current, orphaned = frame()
            live.update(view)
    return current, orphaned


def _journal(
    store: InspectedStore, record: RunRecord, out: Console, sighted: Sighted
) -> tuple[RunRecord, bool]:
    """On a pipe: one line per change of status, until RUN ends or is orphaned."""
    from subagents.cli.output import printable
    from subagents.cli.state import shown_status
    from subagents.cli.waiting_asks import marker

    seen: dict[str, str] = {}
    t0 = time.time()
    while True:
        runs, alive, asks = _subtree(store, record, sighted)
        for r in runs:
            status = shown_status(r, alive)
            if asks.ids(r.run_id):
                status += f" ({marker(asks.ids(r.run_id))})"
            if seen.get(r.run_id) != status:
                seen[r.run_id] = status
                indent = "  " * (r.depth - runs[0].depth)
                line = f"{time.time() - t0:6.2f}s  {indent}{r.agent} {short_id(r.run_id)}  {status}"
                if status != "orphaned" and r.outcome is not None and not r.outcome.ok:
                    line += f": {r.outcome.error}"
                out.print(printable(line), markup=False, highlight=False)
        out.file.flush()  # a pipe is block-buffered: `attach RUN | tee log` sees each change now
        current = runs[0]
        orphaned = alive.orphaned(current)
        if current.status.terminal or orphaned:
            return current, orphaned
        time.sleep(POLL_S)


def _end(
    store: InspectedStore,
    record: RunRecord,
    orphaned: bool,
    out: Console,
    sighted: Sighted,
) -> int:
    from subagents.cli.output import printable
    from subagents.cli.state import liveness
    from subagents.cli.summary import print_outcome
    from subagents.messages import Outcome

    if orphaned:
        sys.stderr.write(
            printable(
                f"subagents attach: run {record.run_id} is orphaned: its host"
                f" ({liveness(store).describe(record)}) is gone; `subagents resume` continues it\n"
            )
        )
        return EXIT_ORPHANED
    runs, _alive, _asks = _subtree(store, record, sighted)
    outcome = record.outcome or Outcome(run_id=record.run_id, status=record.status)
    print_outcome(out, outcome, runs)
    return EXIT_FOR_STATUS.get(record.status, 1)
