"""``max_runs_per_tree`` on the session's 2-node cluster: the supervisor in the driver admits
for every node, so a tree spread over both nodes is counted once, whole."""

from __future__ import annotations

from typing import Any

import pytest

from raycluster import LocalCluster
from subagents.behaviour.function import AgentContext, FunctionAgent, SpawnRefused
from subagents.messages import RunStatus
from subagents.supervision.limits import Limits

from .test_cluster_runtime import ON_HEAD, ON_WORKER, WAIT_S, near, runtime, store

pytestmark = pytest.mark.ray

__all__ = ["store"]  # the fixture, shared with test_cluster_runtime


async def root(ctx: AgentContext) -> str:
    """On the head node: one child on the worker node, which spawns until refused; its
    answer."""
    child = await ctx.spawn("spawner", ctx.task, background=False)
    return str(child.result)


async def spawner(ctx: AgentContext) -> str:
    """On the worker node: spawns ``ctx.task`` children (on the head node) one after
    another; how many were admitted, and why not the next."""
    admitted = 0
    try:
        for i in range(int(ctx.task)):
            await ctx.spawn("near", str(i), background=False)
            admitted += 1
    except SpawnRefused as exc:
        return f"{admitted}: {exc}"
    return f"{admitted}: all admitted"


def test_max_runs_per_tree_holds_for_a_tree_spread_over_both_nodes(
    ray_cluster: LocalCluster, store: Any
) -> None:
    """A tree of at most 4 runs: the root on the head, its child on the worker node, whose
    children go to the head again. The child on the worker has two children admitted (4
    runs), the third is refused naming the limit; another root is a tree of its own."""
    agents = [
        FunctionAgent.create("root", root, metadata=ON_HEAD),
        FunctionAgent.create("spawner", spawner, metadata=ON_WORKER),
        FunctionAgent.create("near", near, metadata=ON_HEAD),
    ]
    with runtime(ray_cluster, store, agents, limits=Limits(max_runs_per_tree=4)) as rt:
        outcome = rt.run("root", "5", timeout=WAIT_S)
        assert outcome.status == RunStatus.COMPLETED, outcome.error
        placed = {(store.get_run(r).agent, n) for r, ns in rt.placements().items() for n in ns}
        again = rt.run("root", "5", timeout=WAIT_S)
        tree = store.list_runs(root_run_id=outcome.run_id)
    head, worker = ray_cluster.head_node_id, ray_cluster.worker_node_id
    assert {("root", head), ("spawner", worker), ("near", head)} <= placed
    assert outcome.result == (
        f"2: max_runs_per_tree: the tree of {outcome.run_id} has admitted 4 runs, the limit is"
        " 4 (Limits.max_runs_per_tree; --max-runs-per-tree)"
    )
    assert len(tree) == 4
    assert again.status == RunStatus.COMPLETED and (again.result or "").startswith("2: ")
