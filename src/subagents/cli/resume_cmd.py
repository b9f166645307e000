"""Continue the runs whose host process is gone (`subagents resume [RUN ...]`).

Every runtime keeps a lease in the store while it hosts runs; when its process dies (a crash,
a kill, a closed terminal), the lease lapses (at once on the same machine, within
SUBAGENTS_LEASE_S, default 15 s, elsewhere) and its unfinished runs are *orphaned* (`ps` says
so). This command takes exactly the orphaned trees up (or only the trees of the RUNs given):
running runs resume from their last checkpoint (no step is taken twice), queued ones queue
again, outcomes not yet delivered are delivered; mail and stops posted meanwhile are then
acted on. Runs whose host is alive are never taken: naming one is an error that names its
host. Give the same --agents folders (and model options) as the original `subagents run`: a
run whose agent is not defined fails. --list only lists what would be resumed.

Exit status: 0 when every resumed root run completed (or nothing was orphaned), otherwise the
exit code of `subagents run` for the first root that did not complete; 1 when a RUN given is
hosted by a live process or has ended, or when nothing was resumed because the runs that
looked orphaned were left to their hosts (on PostgreSQL, a host stalled inside a transaction:
named, with what pg_stat_activity shows).
"""

from __future__ import annotations

import argparse
import sys
import threading
from collections import Counter
from typing import TYPE_CHECKING

import msgspec

from subagents.cli import output
from subagents.cli.command import reports_errors, store_errors
from subagents.cli.runtime_args import Hosted, add_runtime_arguments, start_runtime
from subagents.cli.state import (
    EXIT_FOR_STATUS,
    CliError,
    live_statuses,
    liveness,
    open_existing_store,
    resolve,
)
from subagents.messages import Outcome, RestoreReport, RunRecord
from subagents.store.leases import Liveness

if TYPE_CHECKING:
    from subagents.runtime import RunHandle, Runtime

NAME = "resume"


class Unfinished(msgspec.Struct, frozen=True):
    run_id: str
    agent: str
    status: str
    depth: int
    root_run_id: str
    host: str = ""
    """Its host and that host's lease: alive (renewed when) or gone (since when)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "runs",
        nargs="*",
        metavar="RUN",
        help="only the trees of these runs (each must be orphaned); default: every orphan",
    )
    parser.add_argument(
        "--list", action="store_true", help="only list the orphaned runs; resume nothing"
    )
    add_runtime_arguments(parser)


@reports_errors(NAME)
def run(args: argparse.Namespace) -> int:
    orphans, hosted, roots = survey(args)
    if args.list or not orphans:
        _print_pending(orphans, hosted, as_json=args.json)
        return 0
    hosted_runtime = start_runtime(args, restore=roots if roots is not None else True)
    try:
        report = hosted_runtime.runtime.restore_report
        left = _left_to_their_hosts(args, orphans, report)
        if left and not _took_any(report):
            sys.stderr.write(output.printable(f"subagents resume: nothing resumed: {left}\n"))
            return 1
        if left:
            sys.stderr.write(output.printable(f"subagents resume: {left}\n"))
        return _resume(args, hosted_runtime)
    finally:
        hosted_runtime.close()


def _took_any(report: RestoreReport) -> bool:
    """Whether the restore took any run up: a root (``orphans``), or a run of a tree whose
    root had ended (a detached run that outlived it: resumed, not an orphaned root), or
    ended one (an agent no longer defined)."""
    return bool(
        report.orphans or report.resumed or report.requeued or report.failed or report.cancelled
    )


def _left_to_their_hosts(
    args: argparse.Namespace, orphans: list[Unfinished], report: RestoreReport
) -> str | None:
    """Why runs that looked orphaned (their hosts' leases lapsed) were not taken: the
    restore found a host's lease row held, as a host writing right now holds it; on
    PostgreSQL a host stalled inside a transaction holds it until the server ends that
    transaction (``idle_in_transaction_session_timeout``, 60 s). Each such host named, and
    what ``pg_stat_activity`` says when its row is still held. None: every one was taken
    (or left because its host is being started again, ``restarting``, said elsewhere)."""
    expected = {o.run_id for o in orphans}
    left = [r for r in report.elsewhere if r in expected and r not in report.restarting]
    if not left:
        return None
    with open_existing_store(args.state) as store, store_errors(store):
        owners = Counter(
            record.owner or "?" for r in left if (record := store.get_run(r)) is not None
        )
        holders = getattr(store, "held_in_transaction", None)  # (PostgreSQL's store only)
        held: dict[str, str] = holders(set(owners)) if holders is not None else {}
    said = []
    for owner, n in sorted(owners.items()):
        if owner in held:
            said.append(
                f"{n} run(s) left to their host {owner}: its lease lapsed, but it holds its"
                f" lease row inside a transaction still open ({held[owner]}); its runs stay"
                " its own until that transaction ends (a stalled host's is ended by the"
                " server after 60 s idle: idle_in_transaction_session_timeout); run"
                " `subagents resume` again then"
            )
        else:  # renewed in between (it was only slow), or held while the restore read it
            said.append(
                f"{n} run(s) left to their host {owner}: its lease had lapsed, but the"
                " restore found the host alive or writing (its lease renewed, or held by a"
                " transaction); `subagents resume --list` says where they are now"
            )
    return "; ".join(said)


def survey(
    args: argparse.Namespace,
) -> tuple[list[Unfinished], list[Unfinished], frozenset[str] | None]:
    """The orphaned runs to take (of the trees asked for), the unfinished runs live hosts
    keep, and the roots asked for (None: every orphan). ``CliError`` for a RUN given that is
    hosted by a live process or has ended."""
    with open_existing_store(args.state) as store, store_errors(store):
        alive = liveness(store)  # before the runs (state.liveness says why)
        unfinished = store.list_runs(statuses=live_statuses())
        roots: frozenset[str] | None = None
        if args.runs:
            roots = frozenset(
                _root_to_resume(resolve(store, ref), unfinished, alive) for ref in args.runs
            )
    wanted = [r for r in unfinished if roots is None or r.root_run_id in roots]
    orphans = [_unfinished(r, alive) for r in wanted if _tree_orphaned(r, unfinished, alive)]
    hosted = [_unfinished(r, alive) for r in wanted if not _tree_orphaned(r, unfinished, alive)]
    return orphans, hosted, roots


def _tree_orphaned(record: RunRecord, unfinished: list[RunRecord], alive: Liveness) -> bool:
    """A tree is taken whole or not at all: none of its unfinished runs has a live host."""
    return not any(not alive.orphaned(r) for r in unfinished if r.root_run_id == record.root_run_id)


def _root_to_resume(record: RunRecord, unfinished: list[RunRecord], alive: Liveness) -> str:
    tree = [r for r in unfinished if r.root_run_id == record.root_run_id]
    if not tree:
        raise CliError(
            f"run {record.run_id} ({output.printable(record.agent)}) has ended"
            f" ({record.status}) and nothing of its tree is unfinished: nothing to resume"
        )
    live = next((r for r in tree if not alive.orphaned(r)), None)
    if live is not None:
        raise CliError(
            f"run {record.run_id} ({output.printable(record.agent)}) is not orphaned: its tree"
            f" is hosted by a live process ({alive.describe(live)}); stop it there"
            f" (`subagents stop {record.root_run_id}`) or let it finish"
        )
    return record.root_run_id


def _unfinished(r: RunRecord, alive: Liveness) -> Unfinished:
    return Unfinished(r.run_id, r.agent, str(r.status), r.depth, r.root_run_id, alive.describe(r))


def _print_pending(orphans: list[Unfinished], hosted: list[Unfinished], *, as_json: bool) -> None:
    if as_json:  # "unfinished": what a resume takes (the orphans)
        output.print_json({"unfinished": orphans, "hosted": hosted})
        return
    if hosted:
        hosts = Counter(h.host.split(",")[0] for h in hosted)
        sys.stderr.write(
            output.printable(
                f"{len(hosted)} unfinished run(s) are hosted by live processes and left to them: "
                + "; ".join(f"{host} ({n} run(s))" for host, n in sorted(hosts.items()))
                + "\n"
            )
        )
    if not orphans:
        print("nothing to resume: no orphaned runs")
        return
    output.print_table(
        ("RUN", "AGENT", "STATUS", "DEPTH", "ROOT", "HOST"),
        [(r.run_id, r.agent, r.status, str(r.depth), r.root_run_id, r.host) for r in orphans],
    )


def _resume(args: argparse.Namespace, hosted: Hosted) -> int:
    from subagents.cli.live import LiveTree, watch
    from subagents.cli.summary import print_outcome
    from subagents.logs import note

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
            sys.stderr.write(output.printable(f"subagents resume: {exc}\n"))
    note(
        f"subagents resume: {len(report.resumed)} run(s) resumed, {len(report.requeued)}"
        f" queued again, {len(report.failed)} failed, {len(report.cancelled)} cancelled;"
        f" waiting for {len(handles)} root run(s)"
    )
    done = threading.Event()
    waiting = (rt, handles, report, done)
    threading.Thread(target=_wait_all, args=waiting, name="resume-waiter", daemon=True).start()
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


def _wait_all(
    rt: Runtime, handles: list[RunHandle], report: RestoreReport, done: threading.Event
) -> None:
    """The resumed roots' ends, then those of the runs of every tree taken up that outlive
    their root (a detached run whose root had ended is not a root waited for: closing the
    runtime would cancel it); then ``done``."""
    from subagents.cli.run_cmd import wait_for_outliving

    taken = [rt.get(r) for r in (*report.resumed, *report.requeued)]
    for handle in handles:
        handle.result()
    for root in dict.fromkeys(r.root_run_id for r in taken if r is not None):
        wait_for_outliving(rt, root)
    done.set()
