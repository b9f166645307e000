"""The event log of a SQLite store: every run's events in one table, numbered in the order
written. Read two ways: one run's events (``subagents logs``, the tests), and the stream of
every run's events after a number (``events_after``, ``last_event_seq``), which viewers in
other processes (``subagents watch``, the web console) poll to follow the store live.
``SQLiteStore`` delegates to ``EventRows``; the transactions stay ``store.sqlite_tx``'s.
"""

from __future__ import annotations

import functools
from typing import Any

import msgspec

from subagents.messages import Event, StoredEvent
from subagents.store.deferred import many_rows
from subagents.store.sqlite_event_groups import (
    GROUP_KIND,
    HELD_EVENT,
    expand,
    in_order,
    item_text,
)
from subagents.store.sqlite_tx import Transactions, encode_row

_decoder = msgspec.json.Decoder(Event)

APPEND_EVENT = "INSERT INTO events (run_id, kind, ts, event) VALUES (?, ?, ?, ?)"
many_rows(APPEND_EVENT, 16)  # held events sent 16 to a statement (``deferred.MANY_ROWS``)


class EventRows:
    """The ``events`` table of one SQLite store."""

    def __init__(self, tx: Transactions) -> None:
        self.tx = tx

    def append_event(self, event: Event) -> None:
        kind = event.kind._value_  # (the member's own attribute: ``.value`` is 2 Python calls)
        tx = self.tx
        # held in a batch: one row per run of what the batch sends together, if the event
        # surely reads back inside a group row (``item_text``). One that does not (a long
        # document: it may be nested near the decoder's limit, which a group row's two
        # levels more would pass) is checked and written as a row of its own, as before.
        text = item_text(event) if tx.in_batch else None
        if text is not None:
            tx.defer(
                "events",
                HELD_EVENT,
                (event.run_id, kind, event.ts, text, event),
                f"appending a {kind} event of run {event.run_id}",
            )
            return
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
