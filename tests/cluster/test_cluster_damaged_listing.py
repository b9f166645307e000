"""A damaged runs row on a cluster's store (its record no longer reads): a listing that spares
damaged rows (``list_runs(damaged=[...])``: `ps`, `approvals`, the console's ``/api/runs``)
gets every other run and the damaged one named, across the link as on a local store. Before,
``ClusterStore.list_runs`` did not fill ``damaged``: the head's listing raised, and a console
on a Ray cluster failed on the one row; inside a batch (the listing seeing the batch's held
writes) it still raised. The store service without Ray, then the real client on the session's
cluster (marker ``ray``)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from raycluster import LocalCluster
from subagents.cluster.head import head_actor
from subagents.cluster.remote_store import ClusterStore
from subagents.cluster.store_service import StoreCall, StoreService
from subagents.messages import ApprovalRecord
from subagents.store.base import DamagedRow, StoreError
from subagents.store.sqlite import SQLiteStore

from .records import run

BAD, GOOD, HELD = "r-damaged-bad", "r-damaged-good", "r-damaged-held"


def _damaged_file(path: Path) -> None:
    with SQLiteStore(path) as store:
        store.save_run(run(BAD))
        store.save_run(run(GOOD))
    with sqlite3.connect(path) as db:
        db.execute("UPDATE runs SET record = 'not json' WHERE run_id = ?", (BAD,))


def _ask(run_id: str) -> ApprovalRecord:
    return ApprovalRecord(
        approval_id=f"ap-{run_id}", run_id=run_id, root_run_id=run_id, agent="worker",
        tool="Bash", input={"command": "ls"}, reason="asked", requester="external",
        tool_use_id=f"t-{run_id}", asked_at=1.0 if run_id == BAD else 2.0,
    )  # fmt: skip


def _damaged_asks(path: Path) -> None:
    """Both runs healthy, each with a pending approval; the first approval's row damaged."""
    with SQLiteStore(path) as store:
        for run_id in (BAD, GOOD):
            store.save_run(run(run_id))
            store.save_approval(_ask(run_id))
    with sqlite3.connect(path) as db:
        db.execute("UPDATE approvals SET approval = 'not json' WHERE run_id = ?", (BAD,))


def _names_bad_ask(damaged: list[DamagedRow]) -> None:
    [only] = damaged
    assert only.key == f"ap-{BAD}"
    assert f"cannot read approvals row 'ap-{BAD}'" in str(only)


def _names_bad(damaged: list[DamagedRow]) -> None:
    [only] = damaged
    assert only.key == BAD
    assert f"cannot read runs row '{BAD}'" in str(only)


def test_the_store_service_lists_the_other_runs_and_names_the_damaged_one(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    _damaged_file(path)
    with SQLiteStore(path) as store:
        service = StoreService(store)
        records, named = service.list_runs_sparing(StoreCall("list_runs"))
        assert [r.run_id for r in records] == [GOOD]
        _names_bad([DamagedRow(message, key) for message, key in named])
        with pytest.raises(StoreError, match="not a listing that spares damage"):
            service.list_runs_sparing(StoreCall("get_run", (GOOD,)))


def test_the_store_service_spares_the_damaged_row_after_a_batchs_held_writes(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runs.sqlite3"
    _damaged_file(path)
    with SQLiteStore(path) as store:
        service = StoreService(store)
        held = [StoreCall("save_run", (run(HELD),))]
        records, named = service.list_runs_sparing(StoreCall("list_runs"), held)
        assert sorted(r.run_id for r in records) == [GOOD, HELD]
        _names_bad([DamagedRow(message, key) for message, key in named])
        assert store.get_run(HELD) is None  # the held writes undone: the client's to commit


def test_the_store_service_lists_the_other_approvals_and_names_the_damaged_one(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runs.sqlite3"
    _damaged_asks(path)
    with SQLiteStore(path) as store:
        service = StoreService(store)
        for pending in (True, False):
            call = StoreCall("list_approvals", (), {"pending": pending})
            records, named = service.list_runs_sparing(call)
            assert [a.approval_id for a in records] == [f"ap-{GOOD}"]
            _names_bad_ask([DamagedRow(message, key) for message, key in named])


@pytest.fixture
def served(ray_cluster: LocalCluster, tmp_path: Path) -> Iterator[Any]:
    import ray

    path = tmp_path / "runs.sqlite3"
    _damaged_file(path)
    actor = head_actor(name="test-cluster-damaged", path=str(path))
    yield actor
    ray.kill(actor)


@pytest.mark.ray
def test_a_cluster_store_listing_names_the_damaged_run_and_lists_the_others(served: Any) -> None:
    store = ClusterStore(served, name="test-cluster-damaged")
    damaged: list[DamagedRow] = []
    assert [r.run_id for r in store.list_runs(damaged=damaged)] == [GOOD]
    _names_bad(damaged)
    with pytest.raises(DamagedRow):  # (not sparing: the listing's error, as a local store's)
        store.list_runs()


@pytest.mark.ray
def test_a_cluster_store_listing_inside_a_batch_names_the_damaged_run(served: Any) -> None:
    store = ClusterStore(served, name="test-cluster-damaged")
    damaged: list[DamagedRow] = []
    with store.batch():
        store.save_run(run(HELD))
        listed = store.list_runs(damaged=damaged)
    assert sorted(r.run_id for r in listed) == [GOOD, HELD]
    _names_bad(damaged)
    assert store.get_run(HELD) is not None  # committed with its batch, once


@pytest.fixture
def served_asks(ray_cluster: LocalCluster, tmp_path: Path) -> Iterator[Any]:
    import ray

    path = tmp_path / "runs.sqlite3"
    _damaged_asks(path)
    actor = head_actor(name="test-cluster-damaged-asks", path=str(path))
    yield actor
    ray.kill(actor)


@pytest.mark.ray
def test_a_cluster_store_lists_the_other_approvals_and_names_the_damaged_one(
    served_asks: Any,
) -> None:
    store = ClusterStore(served_asks, name="test-cluster-damaged-asks")
    damaged: list[DamagedRow] = []
    assert [a.approval_id for a in store.list_approvals(damaged=damaged)] == [f"ap-{GOOD}"]
    _names_bad_ask(damaged)
    with pytest.raises(DamagedRow):  # (not sparing: the listing's error, as a local store's)
        store.list_approvals()
