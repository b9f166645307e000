"""A tree started detached on the session's cluster (``runtime._detached_trees``): hosted by a
named, detached actor on the head node, not by the process that started it; another runtime on the
same cluster sees it in the store and mails it through the store's commands; when its root
ends, its host goes (nothing left running). The CLI's `run --detach --ray` (a process that
exits at once; the tree stopped and waited for by later commands) is tested in
tests/cli/test_cli_cluster.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from polling import wait_until
from raycluster import WORKER, LocalCluster
from subagents.behaviour.function import AgentContext, FunctionAgent
from subagents.messages import RunStatus
from subagents.runtime import Runtime
from subagents.supervision.core import AdmissionError

if TYPE_CHECKING:
    from subagents.cluster.remote_store import ClusterStore

pytestmark = pytest.mark.ray

WAIT_S = 120.0


async def gate(ctx: AgentContext) -> str:
    """Waits for one mail; answers with it."""
    mail = await ctx.receive(timeout=WAIT_S)
    assert mail is not None
    return f"{ctx.task}:{mail.content}"


async def keeper(ctx: AgentContext) -> str:
    """A child on the worker node that waits for mail; waits for it (until stopped)."""
    outcome = await ctx.spawn("far_gate", "child", background=False)
    return str(outcome.result)


@pytest.fixture
def store_name(ray_cluster: LocalCluster, tmp_path: Path) -> Iterator[str]:
    """A store of this test's own on the head (its own name, its own file)."""
    import ray

    from subagents.cluster.head import head_actor

    name = f"test-dt-{tmp_path.name}"[:60]
    actor = head_actor(name=name, path=str(tmp_path / "runs.sqlite3"))
    yield name
    ray.kill(actor)


def _gone(host: str) -> None:
    """Waits until the tree host ``host`` has ended (a call that only its death answers)."""
    import ray

    from subagents.cluster.connect import NAMESPACE

    try:
        actor = ray.get_actor(host, namespace=NAMESPACE)
    except ValueError:
        return  # ended already
    with pytest.raises(ray.exceptions.RayActorError):
        ray.get(actor.until_ended.remote(), timeout=WAIT_S)


def test_a_detached_tree_is_seen_and_mailed_by_another_runtime_and_its_host_goes(
    ray_cluster: LocalCluster, store_name: str
) -> None:
    """The tree's host is on the head; its child waits on the worker node; a new runtime in
    this process (not the tree's) finds the child in the store and mails it (a command
    through the store, taken by the tree's host); the tree completes; its host goes."""
    from subagents.cluster.head import head_actor
    from subagents.cluster.remote_store import ClusterStore
    from subagents.runtime import start_detached
    from subagents.runtime._detached_trees import TREE_HOST_PREFIX

    agents = [
        FunctionAgent.create("keeper", keeper),
        FunctionAgent.create("far_gate", gate, metadata={"resources": {WORKER: 1}}),
    ]
    address = ray_cluster.address
    with pytest.raises(AdmissionError, match="unknown agent 'nobody'"):  # before any host
        start_detached("nobody", "x", cluster=address, store_name=store_name, agents=agents)
    with pytest.raises(TypeError, match="store cannot be given"):
        start_detached("keeper", "x", cluster=address, store=None, agents=agents)
    tree = start_detached("keeper", "two", cluster=address, store_name=store_name, agents=agents)
    assert tree.host.startswith(TREE_HOST_PREFIX)
    assert tree.node == ray_cluster.head_node_id  # on the head, beside the store
    store = ClusterStore(head_actor(name=store_name, create=False), name=store_name)
    try:
        # a runtime on the cluster's store; no node hosts of its own (cluster=""): it hosts
        # nothing, it only looks and commands
        with Runtime([], store=store, cluster="", restore=False) as rt:
            root = rt.get(tree.run_id)
            assert root is not None and root.owner == tree.owner != rt.owner  # hosted there
            child = _child_of(rt, tree.run_id)
            rt.send(child, "hello")  # a run another runtime hosts: a command through the store
            ended = rt.wait_all([tree.run_id, child], timeout=WAIT_S)
        assert [o.status for o in ended] == [RunStatus.COMPLETED, RunStatus.COMPLETED]
        assert [o.result for o in ended] == ["child:hello", "child:hello"]
        _gone(tree.host)
    finally:
        store.close()


def _restarting_or_taken_up(store: ClusterStore, run_id: str, owner: str) -> bool:
    """Waits until the killed host's lease is dead while Ray lists the host (True: the
    tree is restarting), or the host's new process has already taken the tree (False)."""
    from subagents.store.leases import Liveness

    seen: list[bool] = []

    def settled() -> bool:
        record = store.get_run(run_id)
        assert record is not None
        if record.owner != owner:
            seen.append(False)
        elif Liveness(store.leases(), listed=store.host_listed).restarting(record):
            seen.append(True)
        return bool(seen)

    wait_until(settled, f"{run_id}'s host seen dead and restarting, or taken up")
    return seen[0]


def _child_of(rt: Runtime, run_id: str) -> str:
    """The child ``run_id`` spawned, once its host recorded it (its events do not reach
    this runtime: the store is polled until a deadline, as the CLI tests do)."""
    import threading
    import time

    deadline = time.monotonic() + WAIT_S
    pause = threading.Event()
    while time.monotonic() < deadline:
        children = rt.runs(requester=run_id, status=RunStatus.WAITING)
        if children:
            return children[0].run_id
        pause.wait(0.05)
    raise AssertionError(f"{run_id} spawned no child waiting within {WAIT_S} s")


def test_a_tree_host_killed_mid_tree_is_started_again_and_ends_the_tree_once(
    ray_cluster: LocalCluster, store_name: str
) -> None:
    """The tree host's process is SIGKILLed while its child waits on the worker node: Ray
    starts the host again, which takes the tree up from the store (the same run ids); the
    child, mailed afterwards, answers; root and child each end once; then the host goes."""
    import os
    import signal

    from subagents.cluster.head import head_actor
    from subagents.cluster.remote_store import ClusterStore
    from subagents.messages import EventKind
    from subagents.runtime import start_detached

    agents = [
        FunctionAgent.create("keeper", keeper),
        FunctionAgent.create("far_gate", gate, metadata={"resources": {WORKER: 1}}),
    ]
    tree = start_detached(
        "keeper", "two", cluster=ray_cluster.address, store_name=store_name, agents=agents
    )
    store = ClusterStore(head_actor(name=store_name, create=False), name=store_name)
    try:
        with Runtime([], store=store, cluster="", restore=False) as rt:
            child = _child_of(rt, tree.run_id)
            os.kill(tree.pid, signal.SIGKILL)
            rt.send(child, "hello")  # kept in the store until the new host takes it
            # a restore while Ray starts the host again leaves the tree to it (were it taken
            # here, where its agents are not defined, its runs would fail)
            restarting = _restarting_or_taken_up(store, tree.run_id, tree.owner)
            with Runtime([], store=store, cluster="", restore=True) as resumer:
                report = resumer.restore_report
            assert {tree.run_id, child} <= set(report.elsewhere), report
            assert not report.resumed and not report.orphans and not report.taken_from
            if restarting:  # (else the new host had taken it up already: a live lease)
                assert {tree.run_id, child} <= set(report.restarting), report
            ended = rt.wait_all([tree.run_id, child], timeout=WAIT_S)
            root = rt.get(tree.run_id)
        assert [o.status for o in ended] == [RunStatus.COMPLETED, RunStatus.COMPLETED]
        assert [o.result for o in ended] == ["child:hello", "child:hello"]
        assert root is not None and root.owner != tree.owner  # taken up by a new process
        assert root.owner is not None and root.owner.endswith(f":{tree.host}")
        for run_id in (tree.run_id, child):
            kinds = [e.kind for e in store.events(run_id)]
            assert kinds.count(EventKind.COMPLETED) == 1, (run_id, kinds)
            assert not {EventKind.FAILED, EventKind.CANCELLED} & set(kinds), (run_id, kinds)
        _gone(tree.host)
    finally:
        store.close()
