"""``get_runs``: the records of many runs in one read, in every store (memory, SQLite,
PostgreSQL, the cluster's head)."""

from __future__ import annotations

from storekit import run

from subagents.messages import RunStatus
from subagents.store.base import RunStore


def test_the_runs_the_store_has_are_read_by_id(store: RunStore) -> None:
    store.save_run(run("a"))
    store.save_run(run("b", status=RunStatus.COMPLETED, ended_at=2.0))
    store.save_run(run("c"))
    found = store.get_runs(["b", "missing", "a", "b"])
    assert found == {"a": store.get_run("a"), "b": store.get_run("b")}
    assert found["b"].status is RunStatus.COMPLETED
    assert store.get_runs([]) == {}
