"""Stop a run with its subtree, every live run, or a run's children (`subagents stop`).

`subagents stop RUN|--all|--requester RUN [--tree|--turn]`.

The stop is posted as a command through the store; the process hosting that run's tree takes
it within a second and cancels the run and its descendants (deepest first): all of them
(`--tree`, the default), or, with `--turn`, all but its detached children (spawned with
`detach`), which go on. `--requester RUN`
posts one stop for each live child of RUN (each goes with its subtree; RUN goes on): one
command per child; the stops one poll of the host takes are one cancel walk
(`supervision/commands.py`), but, unlike `Runtime.stop_all`, they are not one decision. A
run whose host is gone (orphaned) is stopped by this command itself, at once, without
resuming anything: it and its unfinished subtree are cancelled in the store
(`cli.orphan_stop`); on a cluster's store the stop waits for `subagents resume` instead.
With --wait the command waits until the stopped runs have ended in the store (exit 1 if they
have not). A tree stop of a run that has ended stops what outlived it (its detached
children's subtrees); any other stop of an ended run is an error.
"""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING

from subagents.cli import output
from subagents.cli.command import (
    add_inspect_arguments,
    add_run_argument,
    reports_errors,
    store_errors,
)
from subagents.cli.output import printable
from subagents.cli.send_cmd import Posted
from subagents.cli.state import (
    EXIT_USAGE,
    CliError,
    live_statuses,
    liveness,
    open_inspected_store,
    resolve,
)
from subagents.messages import RunRecord

if TYPE_CHECKING:
    from subagents.cli.state import InspectedStore

NAME = "stop"
POLL_S = 0.1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_run_argument(parser, optional=True)
    parser.add_argument("--all", action="store_true", help="stop every live root run")
    parser.add_argument(
        "--requester",
        metavar="RUN",
        default=None,
        help="stop every live run that RUN requested (its children, with their subtrees)",
    )
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument(
        "--tree",
        dest="scope",
        action="store_const",
        const="tree",
        help="stop the run and its whole subtree, detached children included (the default)",
    )
    scope.add_argument(
        "--turn",
        dest="scope",
        action="store_const",
        const="turn",
        help="stop the run (and the children that end with it); its detached children go on",
    )
    parser.set_defaults(scope="tree")
    parser.add_argument(
        "--wait",
        type=float,
        nargs="?",
        const=10.0,
        default=None,
        metavar="S",
        help="wait up to S seconds (default 10) until the runs have ended",
    )
    add_inspect_arguments(parser, run=False)


@reports_errors(NAME)
def run(args: argparse.Namespace) -> int:
    if (args.run_ref is not None) + args.all + (args.requester is not None) != 1:
        raise CliError("give either RUN, --all or --requester RUN", EXIT_USAGE)
    if args.wait is not None and not args.wait >= 0:  # (NaN too: it waited without limit)
        raise CliError(f"--wait must be >= 0 seconds, got {args.wait:g}", EXIT_USAGE)
    with open_inspected_store(args) as store, store_errors(store):
        alive = liveness(store)  # before the runs (state.liveness says why)
        if args.all:
            targets = _live_roots(store)
        elif args.requester is not None:
            targets = _live_children(store, resolve(store, args.requester))
        else:
            record = resolve(store, args.run_ref)
            targets = [record]
            if record.status.terminal:  # its tree may live on: detached children
                targets = _live_tops_below(store, record) if args.scope == "tree" else []
                if not targets:
                    raise CliError(
                        f"run {record.run_id} ({record.agent}) has already ended ({record.status})"
                    )
        posted = [_stop(store, r, alive.orphaned(r), args.scope) for r in targets]
        if args.json:
            output.print_json(posted)
        elif not posted:
            print("no live runs to stop")
        for p in posted if not args.json else ():
            print(printable(_said(p, args.scope)))
        if args.wait is None or not posted:
            return 0
        left = _wait_ended(store, [p.run_id for p in posted], args.wait)
    if left:
        raise CliError(
            f"still live after {args.wait:g}s: {', '.join(left)}; is the process running them"
            " gone? (`subagents resume` continues unfinished runs)"
        )
    if not args.json:
        print("stopped")
    return 0


def _stop(store: InspectedStore, record: RunRecord, orphaned: bool, scope: str) -> Posted:
    """Stop ``record`` (``scope``: its tree, or its turn: not its detached children): at
    once, here, if its host is gone and the store is a local file (``cli.orphan_stop``);
    else by a command for the process hosting it."""
    from subagents.cli.orphan_stop import can_end_here, end_orphaned

    if orphaned and can_end_here(store):
        ended = end_orphaned(store, record.run_id, turn=scope == "turn")
        if ended is not None:
            return Posted(
                command_id=None,
                kind="stop",
                run_id=record.run_id,
                agent=record.agent,
                status="cancelled",
                orphaned=True,
                ended=tuple(r.run_id for r in ended),
            )
        # not ended here: a `resume` took it up meanwhile (its new host stops it), or a run
        # under it is hosted by a live process (not this command's to end): then it is still
        # orphaned, and the stop waits for a `resume`, as the command must say
        orphaned = _still_orphaned(store, record)
    content = "turn" if scope == "turn" else None  # (a stop's content: its scope)
    return Posted(
        command_id=store.post_command("stop", record.run_id, content),
        kind="stop",
        run_id=record.run_id,
        agent=record.agent,
        status=str(record.status),
        orphaned=orphaned,
    )


def _still_orphaned(store: InspectedStore, record: RunRecord) -> bool:
    alive = liveness(store)  # before the run (state.liveness says why)
    now = store.get_run(record.run_id)
    return now is not None and alive.orphaned(now)


def _said(p: Posted, scope: str) -> str:
    """What the command says of one stop."""
    who = f"{printable(p.agent)} {p.run_id}"
    if p.command_id is None:
        return (
            f"stopped {who} and {len(p.ended) - 1} run(s) under it: its host was gone"
            " (orphaned), so they were cancelled in the store now, without resuming them"
            if p.ended
            else f"{who} had already ended"
        )
    then = (
        "its host is gone (orphaned): the stop waits until `subagents resume` takes it up"
        if p.orphaned
        else "the process hosting it stops it and its subtree within a second"
        if scope == "tree"
        else "the process hosting it stops it within a second; its detached children go on"
    )
    return f"posted stop for {who} (command {p.command_id}); {then}"


def _live_roots(store: InspectedStore) -> list[RunRecord]:
    live = store.list_runs(statuses=live_statuses())
    return [r for r in live if r.parent_run_id is None]


def _live_tops_below(store: InspectedStore, ended: RunRecord) -> list[RunRecord]:
    """The highest live runs under ``ended`` (its detached children that outlived it, or
    runs under them): stopping each with its subtree stops what is left of its tree (a
    `--turn` stop before left them running)."""
    tree = store.list_runs(root_run_id=ended.root_run_id)
    parent = {r.run_id: r.parent_run_id for r in tree}
    live = {r.run_id for r in tree if not r.status.terminal}

    def under(run_id: str) -> bool:
        above = parent.get(run_id)
        while above is not None and above != ended.run_id:
            above = parent.get(above)
        return above == ended.run_id

    return [r for r in tree if r.run_id in live and r.parent_run_id not in live and under(r.run_id)]


def _live_children(store: InspectedStore, requester: RunRecord) -> list[RunRecord]:
    """The live runs ``requester`` requested (its children)."""
    live = store.list_runs(statuses=live_statuses(), root_run_id=requester.root_run_id)
    return [r for r in live if r.parent_run_id == requester.run_id]


def _wait_ended(store: InspectedStore, run_ids: list[str], wait: float) -> list[str]:
    """The runs still live after waiting up to ``wait`` seconds for them to end."""
    deadline = time.monotonic() + wait
    while True:
        left = [i for i in run_ids if (r := store.get_run(i)) is not None and not r.status.terminal]
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(POLL_S)
