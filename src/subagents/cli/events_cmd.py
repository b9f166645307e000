"""Every run's events as they happen, one line each (`subagents events`), like `docker events`.

`subagents events [--since T] [--until T] [--root RUN | --run RUN] [--agent NAME] [--kind K]
[--json] [--no-follow]`.

The store numbers every event it keeps, in one order across runs; this command prints the
ones after the last it printed, as they are committed, until interrupted (Ctrl-C ends it
with status 0), until `--until` has passed, or, with `--no-follow`, once it has printed what
the store holds. Without `--since` it starts with what comes next; `--since 10m` (or an ISO
time) prints the events since then first. `--json` prints one JSON object per line: the
event's number in the store (`seq`) and the event (its kind, run, agent, tree, time, data),
the shape `subagents log --json` and the runtime's subscribers see.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from subagents.cli.command import add_inspect_arguments, reports_errors, store_errors
from subagents.cli.since import SinceError, parse_time
from subagents.cli.state import (
    EXIT_USAGE,
    CliError,
    open_inspected_store,
    resolve,
    short_id,
    utf8_text,
)

if TYPE_CHECKING:
    from rich.text import Text

    from subagents.cli.state import InspectedStore
    from subagents.messages import Event, StoredEvent

NAME = "events"
POLL_S = 0.2
"""How often the store is asked for new events while following (it has no notification
other processes can wait on)."""
PAGE = 500
DETAIL_WIDTH = 120


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--since", metavar="T", help="start with the events since T (10m, 2h, an ISO time)"
    )
    parser.add_argument("--until", metavar="T", help="stop once T has passed (10m: ago; ISO)")
    parser.add_argument("--root", metavar="RUN", help="only the events of RUN's tree")
    parser.add_argument("--run", metavar="RUN", help="only the events of RUN")
    parser.add_argument("--agent", metavar="NAME", help="only the events of this agent's runs")
    parser.add_argument(
        "--kind",
        action="append",
        default=[],
        metavar="K",
        help="only events of this kind (repeatable, or comma-separated): started, completed...",
    )
    parser.add_argument(
        "--no-follow",
        dest="follow",
        action="store_false",
        help="print what the store holds and return, instead of waiting for more",
    )
    add_inspect_arguments(parser, run=False)


class Filter:
    """Which events a person asked for (the options above), decided per event."""

    def __init__(
        self,
        *,
        root: str | None,
        run: str | None,
        agent: str | None,
        kinds: frozenset[str],
        since: float | None,
    ) -> None:
        self.root, self.run, self.agent, self.kinds, self.since = root, run, agent, kinds, since

    def wants(self, event: Event) -> bool:
        return (
            (self.root is None or event.root_run_id == self.root)
            and (self.run is None or event.run_id == self.run)
            and (self.agent is None or event.agent == self.agent)
            and (not self.kinds or event.kind.value in self.kinds)
            and (self.since is None or event.ts >= self.since)
        )


def parse_kinds(values: list[str]) -> frozenset[str]:
    """The event kinds asked for, each checked against the kinds there are."""
    from subagents.messages import EventKind

    known = {k.value for k in EventKind}
    kinds = {w.strip().lower() for v in values for w in v.split(",") if w.strip()}
    unknown = sorted(kinds - known)
    if unknown:
        raise CliError(
            f"--kind {unknown[0]!r}: unknown event kind; use one of {', '.join(sorted(known))}",
            EXIT_USAGE,
        )
    return frozenset(kinds)


def _times(args: argparse.Namespace, now: float) -> tuple[float | None, float | None]:
    try:
        since = None if args.since is None else parse_time(args.since, now)
        until = None if args.until is None else parse_time(args.until, now)
    except SinceError as exc:
        raise CliError(f"--since/--until: {exc}", EXIT_USAGE) from None
    return since, until


@reports_errors(NAME)
def run(args: argparse.Namespace) -> int:
    if args.root is not None and args.run is not None:
        raise CliError("give --root RUN or --run RUN, not both", EXIT_USAGE)
    kinds = parse_kinds(args.kind)
    if args.agent is not None:  # argv's bad bytes: no agent is so named; it matched nothing
        utf8_text(args.agent, "--agent")
    since, until = _times(args, time.time())
    with open_inspected_store(args) as store, store_errors(store):
        root = resolve(store, args.root).root_run_id if args.root else None
        one = resolve(store, args.run).run_id if args.run else None
        wanted = Filter(root=root, run=one, agent=args.agent, kinds=kinds, since=since)
        start = store.last_event_seq() if since is None else first_since(store, since)
        try:
            for stored in follow(store, start, follow=args.follow, until=until):
                if wanted.wants(stored.event):
                    _print(stored, as_json=args.json)
        except KeyboardInterrupt:
            return 0
    return 0


SKEW_S = 60.0
"""How far out of order in time the store's events may be (each is stamped where it is
made, then committed, maybe by another host): ``first_since`` starts this much earlier."""


def first_since(store: InspectedStore, since: float) -> int:
    """The event number to read after for the events since ``since``: found by halving the
    numbers (a few reads by the primary key), not by reading every event the store holds
    (`events --since 10m` on a store of millions). Events are numbered as committed and
    stamped as made, nearly in the same order: it starts ``SKEW_S`` early, and the filter
    keeps only those at or after ``since``."""
    bound = since - SKEW_S
    low, high = 0, store.last_event_seq()  # the answer is in [low, high]
    while low < high:
        middle = (low + high) // 2
        page = store.events_after(middle, limit=1)
        if page and page[0].event.ts < bound:
            low = page[0].seq  # that one is before: read after it
        else:
            high = middle
    return low


def follow(
    store: InspectedStore, after: int, *, follow: bool, until: float | None
) -> Iterator[StoredEvent]:
    """The store's events after number ``after``, in order, page by page; then, when
    ``follow``, the new ones as they are committed, until ``until`` (a Unix time) passes."""
    while True:
        page = store.events_after(after, limit=PAGE)
        for stored in page:
            if until is not None and stored.event.ts > until:
                return
            yield stored
            after = stored.seq
        if len(page) == PAGE:
            continue
        if not follow or (until is not None and time.time() > until):
            return
        time.sleep(POLL_S)


def _print(stored: StoredEvent, *, as_json: bool) -> None:
    from subagents.cli import output

    if as_json:
        sys.stdout.write(output.json_line(stored))
    else:
        output.console().print(event_line(stored.event), soft_wrap=True)
    sys.stdout.flush()


def event_line(event: Event) -> Text:
    """``HH:MM:SS.mmm  kind  agent RUN  key=value ...``: one event for people."""
    from rich.text import Text

    from subagents.cli.live import STATUS_STYLE
    from subagents.cli.output import printable
    from subagents.cli.views import clock, one_line

    styles = {str(status): style for status, style in STATUS_STYLE.items()}
    text = Text(f"{clock(event.ts)}  ", style="dim")
    text.append(f"{event.kind.value:<16} ", style=styles.get(event.kind.value, ""))
    text.append(printable(event.agent), style="bold")
    text.append(f" {short_id(event.run_id)}", style="dim")
    details = [
        f"{key}={value}"
        for key, value in event.data.items()
        if value is not None and not isinstance(value, dict | list)
    ]
    if details:
        text.append("  " + one_line(printable(" ".join(details)), DETAIL_WIDTH))
    return text
