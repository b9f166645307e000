"""``get_runs``: the records of many runs in one read, in every store (memory, SQLite,
PostgreSQL, the cluster's head)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from storekit import run

from subagents.messages import RunStatus
from subagents.store.base import READ_SLICE, RunStore
from subagents.store.sqlite import SQLiteStore


def test_the_runs_the_store_has_are_read_by_id(store: RunStore) -> None:
    store.save_run(run("a"))
    store.save_run(run("b", status=RunStatus.COMPLETED, ended_at=2.0))
    store.save_run(run("c"))
    found = store.get_runs(["b", "missing", "a", "b"])
    assert found == {"a": store.get_run("a"), "b": store.get_run("b")}
    assert found["b"].status is RunStatus.COMPLETED
    assert store.get_runs([]) == {}


def test_sqlite_reads_many_runs_within_an_old_sqlites_bound(tmp_path: Path) -> None:
    """SQLite before 3.32 (and builds that lower it) takes at most 999 values a statement:
    a read of more ids than that (a recovery's ``still_owed`` reads ``READ_SLICE`` at once)
    is split so that no statement passes it."""
    store = SQLiteStore(tmp_path / "runs.sqlite3")
    try:
        store._tx.connection().setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 999)
        ids = [f"r{i}" for i in range(READ_SLICE + 7)]
        with store.batch():
            for run_id in ids:
                store.save_run(run(run_id))
        found = store.get_runs(ids)
        assert sorted(found) == sorted(ids)
    finally:
        store.close()
