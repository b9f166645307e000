"""The event log of a SQLite store: every run's events in one table, numbered in the order
written. Read two ways: one run's events (``subagents logs``, the tests), and the stream of
every run's events after a number (``events_after``, ``last_event_seq``), which viewers in
other processes (``subagents watch``, the web console) poll to follow the store live.
``SQLiteStore`` delegates to ``EventRows``; the transactions stay ``store.sqlite_tx``'s.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import msgspec

from subagents.messages import Event, StoredEvent
from subagents.store.deferred import Params, many_rows
from subagents.store.sqlite_event_groups import (
    GROUP_KIND,
    HELD_EVENT,
    expand,
    held_checked,
    held_row,
    in_order,
)
from subagents.store.sqlite_tx import Transactions, encode_row
from subagents.store.writes import APPLY, AppendEvent, Write, superseded

_decoder = msgspec.json.Decoder(Event)

APPEND_EVENT = "INSERT INTO events (run_id, kind, ts, event) VALUES (?, ?, ?, ?)"
many_rows(APPEND_EVENT, 16)  # held events sent 16 to a statement (``deferred.MANY_ROWS``)


class EventRows:
    """The ``events`` table of one SQLite store."""

    def __init__(self, tx: Transactions) -> None:
        self.tx = tx

    def append_event(self, event: Event) -> None:
        tx = self.tx
        # held in a batch: one row per run of what the batch sends together, if the event
        # surely reads back inside a group row (``held_row``). One that does not (a long
        # document: it may be nested near the decoder's limit, which a group row's two
        # levels more would pass) is checked and written as a row of its own, as before.
        row = held_row(event) if tx.in_batch else None
        if row is not None:
            tx.defer("events", HELD_EVENT, row, f"appending a {row[1]} event of run {row[0]}")
            return
        kind = event.kind._value_  # (the member's own attribute: ``.value`` is 2 Python calls)
        tx.defer(
            "events",
            APPEND_EVENT,
            (
                event.run_id,
                kind,
                event.ts,
                encode_row(event, _decoder, f"an event of run {event.run_id} (kind {event.kind})"),
            ),
            f"appending a {kind} event of run {event.run_id}",
        )

    def hold_all(self, appends: Sequence[AppendEvent]) -> None:
        """``append_event`` of each of ``appends``' events in order, inside the open batch:
        those held (``held_row``; a ``checked`` one as it is, ``held_checked``) as one entry
        (``Transactions.defer_rows``: one ``doing`` text, one entry for the batch's flush to
        walk), any other a row of its own, checked as ``append_event`` checks it (a bad one
        refused by name, those before it held)."""
        tx = self.tx
        if not tx.in_batch:  # (``HELD_EVENT`` rows are sent only by a batch's flush)
            for append in appends:
                self.append_event(append.event)
            return
        rows: list[Params] = []
        for append in appends:
            event = append.event
            row = held_checked(event) if append.checked else held_row(event)
            if row is not None:
                rows.append(row)
                continue
            if rows:
                self._hold(rows)
                rows = []
            self.append_event(event)
        if rows:
            self._hold(rows)

    def _hold(self, rows: list[Params]) -> None:
        first = rows[0]
        doing = f"appending a {first[1]} event of run {first[0]}"
        self.tx.defer_rows("events", HELD_EVENT, rows, doing)

    def _numbered(self, rows: list[Any]) -> tuple[list[tuple[int, Event]], int]:
        """``rows`` (seq, kind, event) as numbered events, and the last number they cover
        (a group row's stretch may end above its own: ``sqlite_event_groups``)."""
        out: list[tuple[int, Event]] = []
        top = 0
        tx = self.tx
        for seq, kind, raw in rows:
            if kind == GROUP_KIND:
                events, top = expand(seq, raw, functools.partial(_decode, tx, seq))
                out.extend(events)
            else:
                out.append((seq, tx.decode(_decoder, raw, "events", seq)))
                top = seq
        return out, top

    def events(self, run_id: str) -> list[Event]:
        rows = self.tx.read(
            "SELECT seq, kind, event FROM events WHERE run_id = ? ORDER BY seq",
            (run_id,),
            f"reading the events of run {run_id}",
        )
        return [event for _, event in self._numbered(rows)[0]]

    def events_after(self, seq: int, *, limit: int = 1000) -> list[StoredEvent]:
        """Read in chunks of rows, each read on to the end of its last row's stretch (so
        every row not read holds only numbers above all read), until ``limit`` events above
        ``seq`` are read: a chunk's rows sized by the events per row seen so far, so a page
        of group rows decodes about ``limit`` events, not ``limit`` rows' (~20x as many)."""
        limit = max(0, limit)
        numbered: list[tuple[int, Event]] = []
        above, after, rows_read, rows_wanted = 0, seq, 0, min(limit, _FIRST_ROWS)
        while above < limit:
            rows = self.tx.read(
                "SELECT seq, kind, event FROM events WHERE seq > ? ORDER BY seq LIMIT ?",
                (after, rows_wanted),
                f"reading the events after number {seq}",
            )
            got, top = self._numbered(rows)
            if rows and top > rows[-1][0]:
                # the last row's stretch goes on: its other rows hold numbers below this one's
                more = self.tx.read(
                    "SELECT seq, kind, event FROM events WHERE seq > ? AND seq <= ? ORDER BY seq",
                    (rows[-1][0], top),
                    f"reading the events after number {seq}",
                )
                got.extend(self._numbered(more)[0])
                rows_read += len(more)
            rows_read += len(rows)
            numbered.extend(got)
            above += sum(1 for n, _ in got if n > seq)
            if len(rows) < rows_wanted:
                break  # every row above ``seq`` read
            after = max(top, rows[-1][0])
            per_row = max(1, above // rows_read)  # (each row read holds 1 or more)
            rows_wanted = -(-(limit - above) // per_row)
        return in_order(numbered, seq, limit)

    def last_event_seq(self) -> int:
        rows = self.tx.read("SELECT MAX(seq) FROM events", (), "reading the last event's number")
        return int(rows[0][0] or 0)


_FIRST_ROWS = 16
"""The rows ``events_after`` reads first (then as many as the events per row seen ask)."""


def _decode(tx: Transactions, seq: int, decoder: Any, raw: str) -> Any:
    """A group row decoded, named as its row if damaged."""
    return tx.decode(decoder, raw, "events", seq)


def write_holding_events(store: Any, writes: Sequence[Write]) -> None:
    """``writes`` in order, into ``store``'s open batch (``SQLiteStore._apply_batch``: the
    hook of ``store.writes.write_all``), each run of consecutive events held by one call
    (``EventRows.hold_all``), every other write through its method (``APPLY``), a run's
    superseded saves left out (``superseded``) as ``write_all`` leaves them. Why: a line of
    the supervisor's records is a durable ping-pong's ~10-20 mails, two events each, and
    each event through ``write_all``'s dispatch and the store's methods was ~7 Python
    calls (``benchmarks/README.md``, session 26). A store whose ``append_event`` is its
    own (a subclass counting or failing its writes) has every event go through it."""
    events: EventRows | None = store._events if _appends_as_sqlite(type(store)) else None
    skip = superseded(writes) if len(writes) > 1 else ()
    apply = APPLY
    held: list[AppendEvent] = []
    for i, write in enumerate(writes):
        if type(write) is AppendEvent and events is not None:
            held.append(write)
            continue
        if i in skip:
            continue
        if held and events is not None:
            events.hold_all(held)
            held = []
        apply[type(write)](store, write)
    if held and events is not None:
        events.hold_all(held)


def _appends_as_sqlite(cls: type) -> bool:
    """Whether ``cls``'s ``append_event`` is ``SQLiteStore``'s own (not a subclass's)."""
    known = _APPENDS_AS_SQLITE.get(cls)
    if known is None:
        owner = next(k for k in cls.__mro__ if "append_event" in vars(k))
        known = _APPENDS_AS_SQLITE[cls] = (
            owner.__qualname__ == "SQLiteStore" and owner.__module__ == _SQLITE
        )
    return known


_APPENDS_AS_SQLITE: dict[type, bool] = {}
_SQLITE = "subagents.store.sqlite"
