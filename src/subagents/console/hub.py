"""The open streams' inboxes: each batch of changes the poller finds goes to every one.

Why each inbox is bounded by rows as well as batches: a stream keeps the batches it has not
sent yet while its page reads slowly (or not at all, until ``protocol.py`` resets it), and a
batch holds every row changed in one poll, thousands on a busy store. Past ``BATCHES``
batches or ``ROWS`` rows waiting, the inbox is emptied and its page told to read its data
again (one ``None``: the stream sends ``reload``), so what a stream holds stays bounded
whatever the store does. When the console stops following the store (it was replaced),
every inbox is ended: its stream says ``reload`` (the page reads, and is told why not) and
ends, instead of staying open with nothing more to send.
"""

from __future__ import annotations

import asyncio
from collections import deque

import msgspec

from subagents.console.index import Row

BATCHES = 256
"""Batches a stream may fall behind by; past it, its page reloads its data."""
ROWS = 20_000
"""Rows a stream may hold unsent; past it, its page reloads its data."""


class Batch(msgspec.Struct, frozen=True, kw_only=True):
    """One poll's changes, numbered (``app.Console.version``)."""

    rows: list[Row]
    touched: frozenset[str]
    """The runs something was written about (``feed.Changes.touched``)."""
    approvals: bool
    """The pending approvals changed (``feed.Changes.approvals``)."""
    version: int
    total: int
    """Runs in the store after it."""


class Ended:
    """What ``Inbox.get`` gives once the inbox is ended and empty."""


ENDED = Ended()


class Inbox:
    """One stream's batches not sent yet; ``None`` among them: read everything again."""

    def __init__(self) -> None:
        self.waiting: deque[Batch | None] = deque()
        self.rows = 0
        self.ended = False
        self._ready = asyncio.Event()

    def put(self, batch: Batch) -> None:
        if len(self.waiting) >= BATCHES or self.rows + len(batch.rows) > ROWS:
            self.reset()  # too far behind: it reloads instead
            return
        self.waiting.append(batch)
        self.rows += len(batch.rows)
        self._ready.set()

    def reset(self) -> None:
        """Drop what waits; the stream's next item is ``None`` (read everything again)."""
        self.waiting.clear()
        self.rows = 0
        self.waiting.append(None)
        self._ready.set()

    def end(self) -> None:
        """Nothing more will come: ``get`` gives ``ENDED`` once what waits is taken."""
        self.ended = True
        self._ready.set()

    async def get(self) -> Batch | Ended | None:
        while not self.waiting:
            if self.ended:
                return ENDED
            self._ready.clear()
            await self._ready.wait()
        item = self.waiting.popleft()
        if item is not None:
            self.rows -= len(item.rows)
        return item


class Hub:
    """The open streams' inboxes."""

    def __init__(self) -> None:
        self.inboxes: set[Inbox] = set()

    def subscribe(self) -> Inbox:
        inbox = Inbox()
        self.inboxes.add(inbox)
        return inbox

    def unsubscribe(self, inbox: Inbox) -> None:
        self.inboxes.discard(inbox)

    def publish(self, batch: Batch) -> None:
        for inbox in list(self.inboxes):
            inbox.put(batch)

    def end(self) -> None:
        """Every stream reloads its page's data and ends (the store is no longer followed)."""
        for inbox in list(self.inboxes):
            inbox.reset()
            inbox.end()
