"""console/hub.py: what a stream keeps of the changes it has not sent, bounded (batches and
rows), and its end. Plain asyncio, no server: the inbox is a decision, tested alone."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from subagents.console.hub import BATCHES, ENDED, ROWS, Batch, Hub
from subagents.console.index import Row


def _run(scenario: Coroutine[Any, Any, None]) -> None:
    """Run ``scenario`` on an event loop of its own thread (the browser tests' Playwright
    keeps one running on this one)."""
    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, scenario).result(timeout=60)


def _rows(count: int) -> list[Row]:
    row = Row(
        id="r", parent=None, root="r", root_created=1.0, agent="a", status="running", depth=0,
        created=1.0, started=None, ended=None, steps=0, tokens=0, cost=0.0, label=None,
        task="t", node=None,
    )  # fmt: skip
    return [row] * count


def _batch(rows: int, version: int = 1) -> Batch:
    return Batch(
        rows=_rows(rows), touched=frozenset({"r"}), approvals=False, version=version, total=1
    )


def test_a_stream_behind_by_more_rows_than_the_bound_keeps_one_reload_not_the_rows() -> None:
    async def scenario() -> None:
        hub = Hub()
        inbox = hub.subscribe()
        big = ROWS // 4 + 1
        for version in range(4):  # four polls of many rows each: over the bound at the 4th
            hub.publish(_batch(big, version))
        assert inbox.rows <= ROWS  # what it holds stays bounded...
        assert await inbox.get() is None  # ...and its page is told to read everything again
        assert inbox.rows == 0 and not inbox.waiting
        hub.publish(_batch(3, 9))  # and it follows again from there
        got = await inbox.get()
        assert got is not None and not isinstance(got, type(ENDED)) and got.version == 9

    _run(scenario())


def test_a_stream_behind_by_more_batches_than_the_bound_reloads() -> None:
    async def scenario() -> None:
        hub = Hub()
        inbox = hub.subscribe()
        for version in range(BATCHES + 1):
            hub.publish(_batch(1, version))
        assert len(inbox.waiting) <= BATCHES
        assert await inbox.get() is None

    _run(scenario())


def test_an_ended_hub_gives_each_stream_a_reload_then_its_end() -> None:
    async def scenario() -> None:
        hub = Hub()
        behind, waiting = hub.subscribe(), hub.subscribe()
        hub.publish(_batch(2))
        assert await waiting.get() is not None  # it took the batch: now it waits for more
        asleep = asyncio.ensure_future(waiting.get())
        await asyncio.sleep(0)
        assert not asleep.done()
        hub.end()  # the store is no longer followed
        assert await asleep is None  # woken: read everything again...
        assert await waiting.get() is ENDED  # ...then the end
        assert [await behind.get(), await behind.get()] == [None, ENDED]  # its batch dropped

    _run(scenario())
