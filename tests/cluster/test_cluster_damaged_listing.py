"""A damaged runs row on a cluster's store (its record no longer reads): a listing that spares
damaged rows (``list_runs(damaged=[...])``: `ps`, `approvals`, the console's ``/api/runs``)
gets every other run and the damaged one named, across the link as on a local store. Before,
``ClusterStore.list_runs`` did not fill ``damaged``: the head's listing raised, and a console
on a Ray cluster failed on the one row; inside a batch (the listing seeing the batch's held
writes) it still raised. The store service without Ray, then the real client on the session's
cluster (marker ``ray``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from damaged_rows import ask, damage_asks, damage_run, run, saved
from raycluster import LocalCluster
from subagents.cluster.head import head_actor
from subagents.cluster.remote_store import ClusterStore
from subagents.cluster.store_service import StoreCall, StoreService
from subagents.store.base import DamagedRow, StoreError
from subagents.store.sqlite import SQLiteStore

BAD, GOOD, HELD = "r-damaged-bad", "r-damaged-good", "r-damaged-held"


def _damaged_file(path: Path) -> None:
    """Two roots (tests/damaged_rows.py), the first one's runs row damaged."""
    saved(path, [run(BAD, 1.0), run(GOOD, 2.0)])
    damage_run(path, BAD)


def _damaged_asks(path: Path) -> None:
    """Both runs healthy, each with a pending approval; the first approval's row damaged."""
    records = [run(BAD, 1.0), run(GOOD, 2.0)]
    saved(path, records, [ask(r, n, float(n), f"ap-{r.run_id}") for n, r in enumerate(records)])
    damage_asks(path, BAD)


def _names_bad_ask(damaged: list[DamagedRow]) -> None:
    [only] = damaged
    assert only.key == f"ap-{BAD}" and only.table == "approvals"
    assert only.placed and only.parent == BAD  # (its run, as the row's run_id column says)
    assert f"cannot read approvals row 'ap-{BAD}'" in str(only)


def _names_bad(damaged: list[DamagedRow]) -> None:
    [only] = damaged
    assert only.key == BAD and only.table == "runs"
    assert only.placed and only.parent is None  # (a root, as its parent_run_id column says)
    assert f"cannot read runs row '{BAD}'" in str(only)


def test_the_store_service_lists_the_other_runs_and_names_the_damaged_one(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    _damaged_file(path)
    with SQLiteStore(path) as store:
        service = StoreService(store)
        records, named = service.list_runs_sparing(StoreCall("list_runs"))
        assert [r.run_id for r in records] == [GOOD]
        _names_bad([DamagedRow.from_data(data) for data in named])
        with pytest.raises(StoreError, match="not a listing that spares damage"):
            service.list_runs_sparing(StoreCall("get_run", (GOOD,)))


def test_the_store_service_spares_the_damaged_row_after_a_batchs_held_writes(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runs.sqlite3"
    _damaged_file(path)
    with SQLiteStore(path) as store:
        service = StoreService(store)
        held = [StoreCall("save_run", (run(HELD, 3.0),))]
        records, named = service.list_runs_sparing(StoreCall("list_runs"), held)
        assert sorted(r.run_id for r in records) == [GOOD, HELD]
        _names_bad([DamagedRow.from_data(data) for data in named])
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
            _names_bad_ask([DamagedRow.from_data(data) for data in named])


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
        store.save_run(run(HELD, 3.0))
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
