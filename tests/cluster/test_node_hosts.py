"""Node hosts on the session's cluster: one per node registers with the head; a host's death
(its process SIGKILLed, its node removed) is reported once and a restarted host joins again
as a new incarnation."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest

from polling import wait_until
from raycluster import HEAD, WORKER, LocalCluster
from subagents.cluster.head import head_actor
from subagents.cluster.node_host import custom_resources, start_node_hosts

pytestmark = pytest.mark.ray

T = TypeVar("T")
DEADLINE_S = 120.0


def eventually(probe: Callable[[], T | None], what: str) -> T:
    """Poll ``probe`` (a call to the cluster) until it gives something; fail past a deadline."""
    found: list[T] = []

    def probed() -> bool:
        value = probe()
        if value:
            found.append(value)
        return bool(value)

    wait_until(probed, what, DEADLINE_S, pace=0.1)
    return found[0]


@pytest.fixture(scope="module")
def head(ray_cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    import ray

    path = tmp_path_factory.mktemp("hosts") / "runs.sqlite3"
    actor = head_actor(name="test-hosts", path=str(path), heartbeat_timeout_s=30)
    hosts = start_node_hosts(head="test-hosts", slots=7)
    yield actor
    for host in hosts.values():
        ray.kill(host)
    ray.kill(actor)


def members(head: Any) -> list[Any]:
    import ray

    return list(ray.get(head.members.remote()))


def test_every_node_has_one_host_registered_with_its_resources(
    head: Any, ray_cluster: LocalCluster
) -> None:
    found = eventually(lambda: len(members(head)) == 2 and members(head), "two node hosts")
    by_node = {m.info.node: m for m in found}
    assert set(by_node) == {ray_cluster.head_node_id, ray_cluster.worker_node_id}
    assert HEAD in by_node[ray_cluster.head_node_id].info.resources
    assert WORKER in by_node[ray_cluster.worker_node_id].info.resources
    assert all(m.info.slots == 7 for m in found)


def test_a_killed_host_is_reported_lost_once_and_joins_again(
    head: Any, ray_cluster: LocalCluster
) -> None:
    import ray

    from subagents.cluster.connect import NAMESPACE
    from subagents.cluster.node_host import host_name

    eventually(lambda: len(members(head)) == 2, "two node hosts")
    host = ray.get_actor(host_name("test-hosts", ray_cluster.worker_node_id), namespace=NAMESPACE)
    before = ray.get(host.describe.remote())
    os.kill(before["pid"], signal.SIGKILL)
    losses = eventually(lambda: ray.get(head.losses.remote()), "the loss reported")
    assert [(x.node, x.incarnation) for x in losses] == [
        (ray_cluster.worker_node_id, before["incarnation"])
    ]
    # whichever signal came first (Ray's death notice, or the restarted host registering)
    assert "its actor died" in losses[0].reason or "registered again" in losses[0].reason
    again = eventually(
        lambda: [
            m
            for m in members(head)
            if m.info.node == ray_cluster.worker_node_id and m.incarnation != before["incarnation"]
        ],
        "the restarted host registered again",
    )
    assert len(again) == 1

    def described() -> dict[str, Any] | None:
        # the driver's handle may still see the actor as restarting for a moment after the
        # new process registered with the head: Ray says so (ActorUnavailableError), ask again
        try:
            answer: dict[str, Any] = ray.get(host.describe.remote())
        except ray.exceptions.ActorUnavailableError:
            return None
        return answer

    after = eventually(described, "the restarted host answering")
    assert after["pid"] != before["pid"] and after["incarnation"] == again[0].incarnation
    # the rejoin found the old incarnation already lost: still one report
    assert len(ray.get(head.losses.remote())) == 1


def test_a_removed_node_is_reported_lost(head: Any, ray_cluster: LocalCluster) -> None:
    import ray

    extra = ray_cluster.cluster.add_node(num_cpus=0, resources={"sa-test-extra": 1.0})
    ray_cluster.cluster.wait_for_nodes()
    start_node_hosts(head="test-hosts", slots=7)
    gone_node = eventually(
        lambda: [m for m in members(head) if "sa-test-extra" in m.info.resources],
        "a host on the added node",
    )[0].info.node
    ray_cluster.cluster.remove_node(extra)
    losses = eventually(
        lambda: [x for x in ray.get(head.losses.remote()) if x.node == gone_node],
        "the removed node's loss",
    )
    assert len(losses) == 1
    # the hosts of the nodes still there stay members (the worker's may be registering again
    # after the test before killed it: membership is a state reached, polled for)
    kept = {ray_cluster.head_node_id, ray_cluster.worker_node_id}
    eventually(lambda: {m.info.node for m in members(head)} == kept, "the other hosts kept")
    assert len([x for x in ray.get(head.losses.remote()) if x.node == gone_node]) == 1


def test_custom_resources_leave_rays_own_out() -> None:
    resources = {
        "CPU": 2.0,
        "memory": 1e9,
        "object_store_memory": 1e8,
        "node:10.0.0.1": 1.0,
        "node:__internal_head__": 1.0,
        "accelerator_type:A100": 1.0,
        "GPU": 1.0,
        "gpu-box": 1.0,
    }
    assert custom_resources(resources) == {"gpu-box": 1.0}
