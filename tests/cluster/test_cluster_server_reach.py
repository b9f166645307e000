"""A PostgreSQL run store out of reach of the runs of a Ray cluster: the runs are hosted on
the cluster's nodes, whose commands reach the server from there, with that node's files and
environment, so the check that no command can log in runs on every node too
(``runtime._server_reach.probed_on_nodes``). Real Ray (the session's two-node cluster), the
real PostgreSQL server of the tests, a real runtime in a driver process of its own."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pgserver import PASSWORD
from raycluster import LocalCluster
from subagents.tools.sandbox_exec import kernel_abi

pytestmark = [
    pytest.mark.ray,
    pytest.mark.skipif(kernel_abi() < 4, reason="the kernel offers no Landlock ABI 4+"),
]
DEADLINE_S = 600.0
"""A hang guard: a driver's start (Ray's import and join) and a probe from each node."""

DRIVER = """
import json
import sys
import ray
from subagents.cluster.connect import NAMESPACE
from subagents.definitions.spec import AgentSpec
from subagents.runtime import Runtime, StoreInReach

address, url, workspace, nodes_env = sys.argv[1:5]
# the variables of the nodes' processes (the runs' node hosts, any task), not this one's
env = {"env_vars": json.loads(nodes_env)} if nodes_env != "{}" else None
ray.init(address=address, namespace=NAMESPACE, log_to_driver=False, runtime_env=env)
worker = AgentSpec(name="worker", description="The worker agent.", prompt="You act.")
try:
    rt = Runtime([worker], store=url, cluster=address, workspace=workspace,
                 tool_env=["PGPASSFILE"], restore=False)
except StoreInReach as exc:
    print("refused:", exc)
else:
    rt.close()
    print("started")
"""


def _driver(address: str, url: str, workspace: Path, nodes_env: dict[str, str]) -> str:
    """What a runtime on the cluster said in a driver of its own whose nodes' processes get
    ``nodes_env``: ``started``, or ``refused:`` and why."""
    argv = [sys.executable, "-c", DRIVER, address, url, str(workspace), json.dumps(nodes_env)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=DEADLINE_S, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_a_store_no_nodes_command_logs_in_to_starts(
    ray_cluster: LocalCluster, pg_url: str, tmp_path: Path
) -> None:
    """The same runtime, its nodes without the password file: the probe from each node
    finds no way in (no refusal of a store out of reach)."""
    said = _driver(ray_cluster.address, pg_url, tmp_path, {})
    assert said.strip() == "started", said


def test_a_store_a_nodes_commands_log_in_to_does_not_start(
    ray_cluster: LocalCluster, pg_url: str, tmp_path: Path
) -> None:
    """The nodes' commands get a password file (``tool_env`` names ``$PGPASSFILE``, which
    the nodes' environment sets and the driver's does not): a command on a node logs in to
    the store, so the runtime refuses, naming the node. Before: the probe ran on the
    driver alone, found no way in there, and the runtime started."""
    pgpass = tmp_path / "pgpass"
    pgpass.write_text(f"*:*:*:*:{PASSWORD}\n", encoding="utf-8")
    pgpass.chmod(0o600)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    said = _driver(ray_cluster.address, pg_url, workspace, {"PGPASSFILE": str(pgpass)})
    assert said.startswith("refused:"), said
    assert "a command logs in to it without the runtime's password" in said, said
    assert " from the node " in said, said
    assert PASSWORD not in said


def test_a_node_that_cannot_be_probed_refuses_the_start(
    ray_cluster: LocalCluster, pg_url: str, tmp_path: Path
) -> None:
    """The nodes cannot load psycopg (its implementation named wrongly there), so no probe
    runs on them: nothing says their commands cannot log in, and the start is refused."""
    said = _driver(ray_cluster.address, pg_url, tmp_path, {"PSYCOPG_IMPL": "none-such"})
    assert said.startswith("refused:"), said
    assert "did not run on every node of the cluster" in said, said
