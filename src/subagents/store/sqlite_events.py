"""The event log of a SQLite store: every run's events in one table, numbered in the order
written. Read two ways: one run's events (``subagents logs``, the tests), and the stream of
every run's events after a number (``events_after``, ``last_event_seq``), which viewers in
other processes (``subagents watch``, the web console) poll to follow the store live.
``SQLiteStore`` delegates to ``EventRows``; the transactions stay ``store.sqlite_tx``'s.
"""

from __future__ import annotations

import msgspec

from subagents.messages import Event, StoredEvent
from subagents.store.deferred import many_rows
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
        self.tx.defer(
            "events",
            APPEND_EVENT,
            (
                event.run_id,
                kind,
                event.ts,
                encode_row(event, _decoder, f"an event of run {event.run_id}"),
            ),
            f"appending a {kind} event of run {event.run_id}",
        )

    def events(self, run_id: str) -> list[Event]:
        rows = self.tx.read(
            "SELECT seq, event FROM events WHERE run_id = ? ORDER BY seq",
            (run_id,),
            f"reading the events of run {run_id}",
        )
        return [self.tx.decode(_decoder, raw, "events", seq) for seq, raw in rows]

    def events_after(self, seq: int, *, limit: int = 1000) -> list[StoredEvent]:
        rows = self.tx.read(
            "SELECT seq, event FROM events WHERE seq > ? ORDER BY seq LIMIT ?",
            (seq, max(0, limit)),
            f"reading the events after number {seq}",
        )
        return [
            StoredEvent(seq=n, event=self.tx.decode(_decoder, raw, "events", n)) for n, raw in rows
        ]

    def last_event_seq(self) -> int:
        rows = self.tx.read("SELECT MAX(seq) FROM events", (), "reading the last event's number")
        return int(rows[0][0] or 0)
