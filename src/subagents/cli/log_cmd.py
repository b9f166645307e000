"""A run's transcript in order: its conversation, tool calls, mail and events (`subagents log`).

Each model turn shows the message it answered (the task, tool results, mail) and the reply
(text and tool calls); mail shows its text; the end shows the result or the error. --follow
keeps printing as the run goes on, with what its model is writing as it writes it (`writing`
entries, from the store's preview of the step under way: cli/writing.py), until it ends
(--json --follow prints one JSON object per line), or until its host process is gone (the
run is orphaned: exit 6; `subagents resume` continues it). --tail N shows only the last N
entries, --since T those since T (a duration ago, 10m, or an ISO time), as `docker logs`
does; with --follow they pick what is shown first, and every later entry follows. RUN is an
id, a unique prefix of one, or #N from `ps`.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

import msgspec
from rich.console import Console
from rich.text import Text

from subagents.cli import output
from subagents.cli.command import (
    add_inspect_arguments,
    add_run_argument,
    emit,
    inspecting,
    reports_errors,
    store_errors,
)
from subagents.cli.output import printable
from subagents.cli.state import EXIT_ORPHANED, EXIT_USAGE, CliError, liveness
from subagents.cli.transcript import TERMINAL_KINDS, Entry, transcript
from subagents.cli.views import clock
from subagents.cli.writing import WritingFollower
from subagents.messages import RunRecord

if TYPE_CHECKING:
    from subagents.cli.state import InspectedStore

NAME = "log"
FOLLOW_POLL_S = 0.25

KIND_STYLE = {
    "user": "cyan",
    "assistant": "green",
    "tool_use": "yellow",
    "tool_call": "yellow",
    "tool_result": "dim",
    "mail_in": "magenta",
    "mail_out": "magenta",
    "mail_pending": "magenta",
    "dead_letter": "red",
    "mail_refused": "red",
    "completed": "bold green",
    "failed": "bold red",
    "timed_out": "bold red",
    "budget_exceeded": "bold red",
    "cancelled": "bold magenta",
    "writing": "green dim",
}


class Log(msgspec.Struct, frozen=True):
    """What `log --json` prints: the run's record and its transcript."""

    run: RunRecord
    entries: tuple[Entry, ...]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_run_argument(parser)
    parser.add_argument(
        "-f", "--follow", action="store_true", help="keep printing until the run ends"
    )
    parser.add_argument(
        "-n",
        "--tail",
        type=int,
        default=None,
        metavar="N",
        help="only the last N entries (then, with -f, the new ones)",
    )
    parser.add_argument(
        "--since",
        metavar="T",
        help="only the entries since T: a duration ago (90s, 10m, 2h) or an ISO time",
    )
    add_inspect_arguments(parser, run=False)


class Window(msgspec.Struct, frozen=True):
    """Which entries a person asked for: the last ``tail`` (None: all), those at or after
    ``since`` (a Unix time; None: all)."""

    tail: int | None = None
    since: float | None = None

    def of(self, entries: Sequence[Entry]) -> list[Entry]:
        chosen = [e for e in entries if self.since is None or e.ts >= self.since]
        return chosen if self.tail is None else chosen[max(0, len(chosen) - self.tail) :]


def window(args: argparse.Namespace) -> Window:
    """``--tail`` and ``--since``, checked."""
    from subagents.cli.since import SinceError, parse_time

    if args.tail is not None and args.tail < 0:
        raise CliError(f"--tail must be a number >= 0, got {args.tail}", EXIT_USAGE)
    try:
        since = None if args.since is None else parse_time(args.since, time.time())
    except SinceError as exc:
        raise CliError(f"--since: {exc}", EXIT_USAGE) from None
    return Window(tail=args.tail, since=since)


@reports_errors(NAME)
def run(args: argparse.Namespace) -> int:
    shown = window(args)
    with inspecting(args) as (store, _alive, record):
        if args.follow:
            return follow(store, record.run_id, as_json=args.json, shown=shown)
        record, entries = read(store, record.run_id, final=True)
    entries = shown.of(entries)
    return emit(
        args,
        Log(run=record, entries=tuple(entries)),
        lambda: show(output.console(), record, entries, header=True),
    )


def read(store: InspectedStore, run_id: str, *, final: bool) -> tuple[RunRecord, list[Entry]]:
    """The record and transcript of ``run_id`` as the store has them now."""
    with store_errors():
        record = store.get_run(run_id)
        if record is None:
            raise CliError(f"run {run_id} is no longer in the store")
        events = store.events(run_id)
        if not record.status.terminal and any(e.kind in TERMINAL_KINDS for e in events):
            # the run ended between the two reads (its end's record and event are one
            # write): take the record it ended with, or its end would print without its
            # result and a follower, seeing it printed, would never print it again
            record = store.get_run(run_id) or record
        checkpoint = store.load_checkpoint(run_id)
        mail = store.mail_for(run_id)
        names = {
            r.run_id: r.agent
            for r in store.list_runs(root_run_id=record.root_run_id, include_archived=True)
        }
    entries = transcript(
        record, events, checkpoint, mail, names=names, final=final or record.status.terminal
    )
    return record, entries


def follow(
    store: InspectedStore, run_id: str, *, as_json: bool, shown: Window | None = None
) -> int:
    """Print entries as they are written, until the run has ended (0) or its host is gone
    (``EXIT_ORPHANED``: nothing more will be written until a resume). ``shown`` picks the
    entries printed first; every later one is printed."""
    out = output.console()
    printed = 0
    header = not as_json
    first = True
    writing = WritingFollower()
    while True:
        alive = liveness(store)  # before the run (state.liveness says why)
        record, entries = read(store, run_id, final=False)
        new = shown.of(entries) if first and shown is not None else entries[printed:]
        first = False
        printed = len(entries)
        with store_errors():
            new = new + writing.poll(store, record)  # what its model is writing now
        if as_json:
            for entry in new:
                sys.stdout.write(output.json_line(entry))
            sys.stdout.flush()
        else:
            show(out, record, new, header=header)
            header = False
        if record.status.terminal:
            return 0
        if alive.orphaned(record):
            sys.stderr.write(
                printable(
                    f"subagents log: run {record.run_id} is orphaned: its host"
                    f" ({alive.describe(record)}) is gone; `subagents resume` continues it\n"
                )
            )
            return EXIT_ORPHANED
        time.sleep(FOLLOW_POLL_S)


def show(out: Console, record: RunRecord, entries: Sequence[Entry], *, header: bool) -> None:
    if header:
        title = Text(printable(f"{record.agent} {record.run_id}"), style="bold")
        title.append(f"  {record.status}  depth {record.depth}")
        if record.parent_run_id:
            title.append(printable(f"  parent {record.parent_run_id}"))
        out.print(title, soft_wrap=True)
    for entry in entries:
        out.print(line(entry), soft_wrap=True)
    sys.stdout.flush()


def line(entry: Entry) -> Text:
    """``HH:MM:SS.mmm  kind  text``; further lines of the text indented under it."""
    stamp = clock(entry.ts)
    style = KIND_STYLE.get(entry.kind, "")
    lines = printable(entry.text).split("\n") or [""]
    text = Text(f"{stamp}  ", style="dim")
    text.append(f"{entry.kind:<12} " if lines[0] else entry.kind, style=style)
    text.append(lines[0].rstrip())
    pad = " " * (len(stamp) + 2 + 12 + 1)
    for more in lines[1:]:
        text.append(f"\n{pad}{more}".rstrip())
    return text
