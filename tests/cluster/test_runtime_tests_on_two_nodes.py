"""A few of the runtime's own tests (mail, limits, a stop cascade, budgets), run unchanged
with their runs hosted on the session's 2-node cluster.

Why only a few here: every ``Runtime`` on a cluster starts a node host per node (Ray actors,
processes: seconds each here), so the whole runtime suite on two nodes takes minutes; it runs
with ``pytest --on-cluster tests/runtime tests/policies`` (docs/cluster.md, "Tests"). These
keep the behaviours the cluster must not change in CI at the cost of a few seconds each: each
test function is called as it is, with ``$SUBAGENTS_RAY_ADDRESS`` pointing at the cluster (so
its ``Runtime`` joins it, as ``--on-cluster`` does) and a store of its own (a SQLite file).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from policies import test_budgets
from raycluster import LocalCluster
from runtime import test_lifecycle_api, test_limits_race, test_mail, test_stop_timeout
from subagents.store.sqlite import SQLiteStore

pytestmark = pytest.mark.ray

WITH_A_STORE: dict[str, Callable[[Any], None]] = {
    "mail-in-order": test_mail.test_mail_from_one_sender_arrives_in_order,
    "mail-unread-by-a-stopped-run": (
        test_mail.test_mail_unread_by_a_stopped_run_comes_back_to_its_sender
    ),
    "limits-under-racing-spawns": (
        test_limits_race.test_limits_hold_under_racing_spawns_from_many_threads
    ),
    "stop-cascade-of-a-timeout": (
        test_stop_timeout.test_a_timeout_ends_the_subtree_once_and_the_others_finish
    ),
    "stop-all-of-a-requester": (
        test_lifecycle_api.test_stop_all_stops_every_run_a_run_requested_with_their_subtrees
    ),
}


@pytest.fixture
def on_two_nodes(ray_cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUBAGENTS_RAY_ADDRESS", ray_cluster.address)


@pytest.mark.usefixtures("on_two_nodes")
@pytest.mark.parametrize("name", sorted(WITH_A_STORE))
def test_a_runtime_test_passes_on_two_nodes(name: str, tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    try:
        WITH_A_STORE[name](store)
    finally:
        store.close()


@pytest.mark.usefixtures("on_two_nodes")
def test_a_restored_run_keeps_its_budget_on_two_nodes(tmp_path: Path) -> None:
    test_budgets.test_a_restored_run_keeps_its_budget(tmp_path)
