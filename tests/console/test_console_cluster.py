"""`subagents serve --ray ADDRESS`: the console over a Ray cluster's store (the head's file,
reached through its store actor): the runs, a run's page, a change followed live, a stop
posted through the cluster's store; no continuation (as `subagents continue`)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from consolekit import Served, serving, wait_for

from raycluster import LocalCluster
from subagents.messages import Event, EventKind, Lease, RunRecord, RunStatus
from subagents.store.sqlite import SQLiteStore

pytestmark = pytest.mark.ray
OWNER = "node-b:4242:abc"


def _run(run_id: str, status: RunStatus) -> RunRecord:
    return RunRecord(
        run_id=run_id,
        agent="worker",
        task=f"task of {run_id}",
        root_run_id=run_id,
        status=status,
        created_at=time.time(),
        owner=OWNER,
    )


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, ray_cluster: LocalCluster) -> Iterator[Any]:
    """The cluster's store actor serving a file of its own, with a live run and an ended one."""
    import ray

    from subagents.cluster.head import head_actor
    from subagents.cluster.remote_store import ClusterStore

    path = tmp_path_factory.mktemp("console-cluster") / "runs.sqlite3"
    SQLiteStore(path).close()
    actor = head_actor(path=str(path))
    cluster_store = ClusterStore(actor)
    far = time.time() + 3600
    cluster_store.acquire_lease(
        Lease(owner=OWNER, host="node-b", pid=4242, renewed_at=far, expires_at=far)
    )
    cluster_store.save_run(_run("r-live", RunStatus.RUNNING))
    cluster_store.save_run(_run("r-done", RunStatus.COMPLETED))
    yield cluster_store
    ray.kill(actor)


@pytest.fixture(scope="module")
def served(store: Any, ray_cluster: LocalCluster) -> Iterator[Served]:
    with serving(Path(store.path), ray=ray_cluster.address) as served:
        yield served


def _get(served: Served, path: str) -> Any:
    status, _, body = served.request("GET", path, headers=served.authorized())
    assert status == 200, body
    return json.loads(body)


def test_the_console_shows_and_follows_a_clusters_store(served: Served, store: Any) -> None:
    assert {r["id"] for r in _get(served, "/api/runs")["rows"]} == {"r-live", "r-done"}
    assert _get(served, "/api/session")["continuable"] is False
    page = _get(served, "/api/runs/r-done")
    assert (page["run"]["run_id"], page["can_continue"]) == ("r-done", False)
    with store.batch():  # a run admitted on the cluster, as its supervisor writes it
        store.save_run(_run("r-new", RunStatus.RUNNING))
        store.append_event(
            Event(kind=EventKind.SPAWNED, run_id="r-new", agent="worker", root_run_id="r-new")
        )

    def listed() -> bool:
        return "r-new" in {r["id"] for r in _get(served, "/api/runs")["rows"]}

    wait_for(listed, "the new run on the page")


def test_a_stop_from_the_console_is_posted_through_the_clusters_store(
    served: Served, store: Any
) -> None:
    headers = {
        "Content-Type": "application/json",
        "X-Console-Token": served.token,
        "Origin": f"http://127.0.0.1:{served.port}",
    }
    status, _, body = served.request("POST", "/api/runs/r-live/stop", headers=headers, body=b"{}")
    assert status == 200, body
    assert [(c.kind, c.run_id) for c in store.take_commands()] == [("stop", "r-live")]
    headers_continue = {**headers}
    status, _, body = served.request(
        "POST", "/api/runs/r-done/continue", headers=headers_continue, body=b'{"text": "more"}'
    )
    assert status == 404 and "no action 'continue' here" in json.loads(body)["error"]
