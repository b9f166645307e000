"""The cluster's store out of its runs' reach: its SQLite file is on the head node, and a
runtime whose runs' commands could write it there does not start. Real Ray (the session's
cluster), a real store actor on the head, a real runtime."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from raycluster import LocalCluster
from subagents.definitions.spec import AgentSpec
from subagents.runtime import Runtime, StoreInReach
from subagents.tools.sandbox_exec import kernel_abi

pytestmark = [
    pytest.mark.ray,
    pytest.mark.skipif(kernel_abi() < 4, reason="the kernel offers no Landlock ABI 4+"),
]
WORKER = AgentSpec(name="worker", description="The worker agent.", prompt="You act.")


@pytest.fixture
def head_store(ray_cluster: LocalCluster, tmp_path: Path) -> Iterator[tuple[Any, Path]]:
    """A store actor on the head node serving a file under ``tmp_path/ws/state``."""
    import ray

    from subagents.cluster.head import head_actor
    from subagents.cluster.remote_store import ClusterStore

    path = tmp_path / "ws" / "state" / "runs.sqlite3"
    path.parent.mkdir(parents=True)
    name = f"test-reach-{tmp_path.name}"[:60]
    actor = head_actor(name=name, path=str(path))
    client = ClusterStore(actor, name=name)
    yield client, path
    client.close()
    ray.kill(actor)


def test_a_runtime_whose_runs_could_write_the_clusters_store_does_not_start(
    ray_cluster: LocalCluster, head_store: tuple[Any, Path], tmp_path: Path
) -> None:
    """The workspace holds the directory of the store's file on the head node: refused,
    by a check run on the head, whose file system is the one that holds the file (the
    driver's machine may be another)."""
    store, path = head_store
    with pytest.raises(StoreInReach) as refused:
        Runtime(
            [WORKER], store=store, cluster=ray_cluster.address, workspace=tmp_path / "ws",
            restore=False,
        )  # fmt: skip
    said = str(refused.value)
    assert f"the run store {path} is inside {tmp_path / 'ws'} (the workspace)" in said, said
    assert f"(checked on the cluster's head node {socket.gethostname()}, which holds it)" in said
