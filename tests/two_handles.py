"""Two handles on one store's data, for the tests of another writer's end (the one-end rule,
a live save refused over an end, ends noticed at the command poll): the runtime's store and
a stranger's (`subagents stop` from another process, a takeover, a recovery), on every store:
memory (the program's own handle: one object), SQLite (a second connection to the file),
PostgreSQL (a second connection: tests/pgserver.py).

Use: ``stores = two_handles.stores`` in a test module (the fixture, by that name)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from subagents.messages import Outcome, RunRecord, RunStatus
from subagents.store.base import RunStore
from subagents.store.memory import MemoryStore

WAIT = 60.0


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[RunStore, RunStore]]:
    """The runtime's store and the stranger's handle on the same data."""
    if request.param == "memory":
        store = MemoryStore()
        yield store, store
        return
    if request.param == "sqlite":
        from subagents.store.sqlite import SQLiteStore

        first, second = SQLiteStore(tmp_path / "runs.db"), SQLiteStore(tmp_path / "runs.db")
    else:
        from subagents.store.postgres import PostgresStore

        url = request.getfixturevalue("pg_url")
        first, second = PostgresStore(url), PostgresStore(url)
    try:
        yield first, second
    finally:
        second.close()
        first.close()


def started(store: RunStore, run_id: str) -> RunRecord:
    """``run_id``'s record once the store keeps it started."""
    deadline = time.monotonic() + WAIT
    while (record := store.get_run(run_id)) is None or record.started_at is None:
        assert time.monotonic() < deadline, f"{run_id}'s start"
        time.sleep(0.02)
    return record


def end_elsewhere(other: RunStore, record: RunRecord) -> None:
    """The stranger's end of ``record``'s run: cancelled, with its outcome, no event."""
    end = Outcome(run_id=record.run_id, status=RunStatus.CANCELLED, error="elsewhere")
    with other.batch():
        ended = msgspec.structs.replace(
            record, status=RunStatus.CANCELLED, ended_at=time.time(), outcome=end
        )
        other.save_run(ended)
        other.save_outcome(end)
