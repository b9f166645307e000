"""`ps --watch`: after the listing, a row each time a run changes, as `kubectl get -w`.

Why it follows the store's events rather than listing again: every change of a run is an
event the store numbers in one order (`RunStore.events_after`), so a watcher asks for what
came after the last it saw and reads back only the runs those events are about: a store of
100,000 runs costs a watcher what changes, not what is there. A host that dies writes no
event, so the leases are read at each poll too (``Hosted``): a run turning ``orphaned`` gets
its row. The rows printed are the
listing's rows (the same columns, plain, or one JSON object per line with --json), one per run
per poll however many events it had. A run the listing showed, or one that matched since, is
followed to its end even when its new status is not one the listing asked for (a run listed
as running is shown completing); a run that never matched stays out.
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any, Protocol

from subagents.cli.damaged import read_sparing, said
from subagents.cli.output import json_line, printable
from subagents.cli.state import (
    ORPHANED,
    RESTARTING,
    live_statuses,
    liveness,
    short_id,
    shown_status,
)
from subagents.cli.views import age, duration, one_line

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from subagents.cli.state import InspectedStore
    from subagents.messages import RunRecord
    from subagents.store.base import DamagedRow
    from subagents.store.leases import Liveness


class Chooser(Protocol):
    """The runs a watch is about (``ps_cmd.Selection``)."""

    def matches(self, record: RunRecord, alive: Liveness) -> bool: ...


POLL_S = 0.25
PAGE = 1000
LABEL_WIDTH = 20
WIDTHS = (10, 14, 16, 6, 10, 6, 8, 6, 8, LABEL_WIDTH)
"""Columns of a watched row (RUN, AGENT, STATUS, DEPTH, PARENT, AGE, TIME, STEPS, TOKENS,
LABEL), padded so that rows printed one by one line up; TASK, last, is not."""


def watch(
    store: InspectedStore,
    chosen: Chooser,
    *,
    after: int,
    shown: Iterable[RunRecord],
    alive: Liveness,
    json_row: Callable[[RunRecord, Liveness], Any] | None,
    damaged: list[DamagedRow] | None = None,
) -> int:
    """Print a row for each change of a run ``chosen`` asks for, from event number
    ``after`` on, until interrupted (status 0); ``alive``: the hosts alive as the listing
    judged them (a host that died since, even before this begins, is then a change: read
    here, it would be the watch's starting point and its runs' end never shown);
    ``json_row``: each row as JSON, made by it (``ps --json``'s rows), else plain columns;
    ``damaged``: the runs rows already named as damaged; one met later (its record no longer
    reads) is named on stderr once, added there, and left out, the watch going on."""
    damaged = [] if damaged is None else damaged
    followed = {r.run_id for r in shown}
    unread: list[DamagedRow] = []  # (a damaged row is named when a change of its run comes)
    hosted = Hosted(store.list_runs(statuses=live_statuses(), damaged=unread), alive)
    try:
        while True:
            page = store.events_after(after, limit=PAGE)
            before, alive = alive, liveness(store)
            evented = dict.fromkeys(s.event.run_id for s in page)
            changed = dict(evented)
            if alive.live != before.live:  # a host came or went: its runs' status with it
                changed.update(dict.fromkeys(hosted.unfinished))
            for record in _records(store, list(changed), damaged):
                if not hosted.moved(record, alive, evented=record.run_id in evented):
                    continue
                if record.run_id in followed or chosen.matches(record, alive):
                    followed.add(record.run_id)
                    _print(record, alive, json_row)
            if page:
                after = page[-1].seq
            if len(page) < PAGE:
                time.sleep(POLL_S)
    except KeyboardInterrupt:
        return 0


class Hosted:
    """The unfinished runs a watch has seen (those live when it began, and those with events
    since), with the status it last saw of each: a run whose host dies writes no event, so
    when the hosts alive change (a lease lapses, a `resume` takes runs up) these are read
    again, and a row is printed for each whose shown status moved (``orphaned``). Its size
    is the runs live meanwhile, not the store's."""

    def __init__(self, records: Iterable[RunRecord], alive: Liveness) -> None:
        self.unfinished = {r.run_id: shown_status(r, alive) for r in records}

    def moved(self, record: RunRecord, alive: Liveness, *, evented: bool) -> bool:
        """Whether ``record`` changed since last seen: it has new events, or its shown
        status is not the one last seen."""
        status = shown_status(record, alive)
        before = self.unfinished.pop(record.run_id, None)
        if not record.status.terminal:
            self.unfinished[record.run_id] = status
        return evented or before != status


def _records(
    store: InspectedStore, run_ids: list[str], damaged: list[DamagedRow]
) -> list[RunRecord]:
    """The records of ``run_ids`` (gone ones left out); a damaged one is named and left out
    (``ps``'s way): it was the watch's error, ending it at the first change of that run."""
    named = len(damaged)
    records = [read_sparing(store, run_id, damaged) for run_id in run_ids]
    said("ps", damaged[named:])
    return [r for r in records if r is not None]


def _print(
    record: RunRecord, alive: Liveness, json_row: Callable[[RunRecord, Liveness], Any] | None
) -> None:
    if json_row is not None:
        sys.stdout.write(json_line(json_row(record, alive)))
    else:
        sys.stdout.write(row_line(record, alive, time.time()) + "\n")
    sys.stdout.flush()


def row_line(record: RunRecord, alive: Liveness, now: float) -> str:
    """One watched row: the listing's columns, ``-`` in place of the row number (``#N``
    names rows of a listing, not of a watch)."""
    status = (
        RESTARTING
        if alive.restarting(record)
        else ORPHANED
        if alive.orphaned(record)
        else str(record.status)
    )
    cells = (
        short_id(record.run_id),
        printable(record.agent),
        status,
        str(record.depth),
        short_id(record.parent_run_id) if record.parent_run_id else "-",
        age(record.created_at, now),
        duration(record, now),
        str(record.steps),
        str(record.usage.total_tokens),
        one_line(record.label, LABEL_WIDTH) or "-",
    )
    padded = [cell.ljust(width) for cell, width in zip(cells, WIDTHS, strict=True)]
    return "  ".join(["-", *padded, one_line(printable(record.task), 48)]).rstrip()
