"""One local 2-node Ray cluster for the whole test session, started only if a ``ray`` test runs.

Why one per session: a cluster costs ~20 s and ~700 MB to start here; every ``ray`` test
shares it and keeps itself apart by naming its own actors (its own store actor, its own
node hosts). Why lazily: the fixture is session-scoped, so pytest builds it when the first
test that asks for it runs, and never in a run that selects no ``ray`` test.

The two nodes carry custom resources (``HEAD`` and ``WORKER``, 1,000 units each) so a test can
pin an actor to either node (``resources={WORKER: 1}``) and observe placement.

Ray 2.60 facts this relies on (docs/cluster.md): token auth is on by default and writes
``~/.ray/auth_token`` (``RAY_AUTH_MODE=disabled`` here, set before any Ray process starts);
its session directory holds unix sockets whose paths must stay short (``_temp_dir`` under
/tmp, not pytest's long tmp paths); no dashboard.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

HEAD = "sa-test-head"
WORKER = "sa-test-worker"
UNITS = 1000.0

RAY_ENV = {
    "RAY_AUTH_MODE": "disabled",  # no ~/.ray/auth_token for a throwaway local cluster
    "RAY_USAGE_STATS_ENABLED": "0",  # nothing leaves the machine, no prompt
    "RAY_worker_niceness": "0",  # Ray nices its workers (15): on a shared machine they starve
}


@dataclass
class LocalCluster:
    """The session's cluster: its address, its two nodes and Ray's ``Cluster`` handle."""

    address: str
    cluster: Any
    temp_dir: str
    head_node_id: str
    worker_node_id: str

    def node_of(self, resource: str) -> str:
        return self.head_node_id if resource == HEAD else self.worker_node_id


def _node_ids(ray: Any) -> tuple[str, str]:
    head = worker = ""
    for node in ray.nodes():
        if not node.get("Alive"):
            continue
        if HEAD in node["Resources"]:
            head = node["NodeID"]
        elif WORKER in node["Resources"]:
            worker = node["NodeID"]
    assert head and worker, f"the test cluster lacks a node: {ray.nodes()}"
    return head, worker


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[LocalCluster]:
    """A head and a worker node in this machine, the test process connected as a driver."""
    ray = pytest.importorskip("ray", reason="Ray is not installed: pip install -e '.[ray]'")
    from ray.cluster_utils import Cluster

    from subagents.cluster.connect import NAMESPACE

    root = tempfile.mkdtemp(prefix="sa-ray-", dir="/tmp")  # short: unix socket paths
    temp_dir = os.path.join(root, "ray")
    env = {**RAY_ENV, "RAY_TMPDIR": root}  # Ray's own files (its address file too) in there
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    cluster = None
    try:
        cluster = Cluster(
            initialize_head=True,
            head_node_args={
                "num_cpus": 1,
                "resources": {HEAD: UNITS},
                "temp_dir": temp_dir,
                "include_dashboard": False,
            },
        )
        cluster.add_node(num_cpus=1, resources={WORKER: UNITS}, temp_dir=temp_dir)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, namespace=NAMESPACE, log_to_driver=False)
        head, worker = _node_ids(ray)
        yield LocalCluster(cluster.address, cluster, temp_dir, head, worker)
    finally:
        if ray.is_initialized():
            ray.shutdown()
        if cluster is not None:
            cluster.shutdown()
        shutil.rmtree(root, ignore_errors=True)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
