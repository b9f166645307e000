"""NodeHost: one Ray actor per node, the home of the runs placed on that node.

Phase A (this module now): it registers with the head, beats, and answers the head's
``watch`` call only when it leaves on purpose, which is how the head learns of its death at
once (``liveness``). Phase B: it hosts a pykka runtime, started through the actor-starting
interface of ``actors/`` (never pykka internals), to which the head's effects are delivered
in batches.

Why one Ray actor per node and not one per run: a Ray actor is a process (~42 MB, ~1 s to
start here); a run is a pykka actor (~22 KB, microseconds). See docs/cluster.md.

Options: pinned to its node (``NodeAffinitySchedulingStrategy(soft=False)``: a host belongs to
its node; when the node goes its runs move, not the host); ``max_restarts=-1`` (its process
killed: Ray starts it again on the same node, it registers as a new incarnation and hosts
nothing from before); ``num_cpus=0`` (it takes no CPU slot from other Ray work); an async
actor, so ``watch`` waits without holding a thread.
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
from typing import Any

import structlog

from subagents.cluster.connect import HEAD_ACTOR, NAMESPACE, import_ray
from subagents.cluster.membership import NodeInfo

log = structlog.get_logger("subagents.cluster")

BEAT_S = 1.0
"""How often a host tells the head it is alive."""

STANDARD_RESOURCES = ("CPU", "GPU", "memory", "object_store_memory")


def custom_resources(resources: dict[str, float]) -> dict[str, float]:
    """A node's custom resources (what ``ray start --resources`` gave it): what definitions
    may require. Ray's own (CPU, memory, ``node:<ip>``, accelerator types) are left out."""
    return {
        name: amount
        for name, amount in resources.items()
        if name not in STANDARD_RESOURCES
        and not name.startswith("node:")
        and not name.startswith("accelerator_type:")
    }


class NodeHost:
    """The actor's class (see the module's docstring)."""

    def __init__(self, head: str = HEAD_ACTOR, slots: int = 100, beat_s: float = BEAT_S) -> None:
        ray = import_ray()
        self._ray = ray
        context = ray.get_runtime_context()
        self.node: str = context.get_node_id()
        self._me = context.current_actor
        self._head = ray.get_actor(head, namespace=NAMESPACE)
        resources: dict[str, float] = {}
        for node in ray.nodes():
            if node.get("NodeID") == self.node:
                resources = custom_resources(dict(node.get("Resources", {})))
        self.info = NodeInfo(
            node=self.node, host=socket.gethostname(), slots=slots, resources=resources
        )
        self.incarnation: int = ray.get(self._head.register.remote(self.info, self._me))
        self._beat_s = beat_s
        self._left: asyncio.Event | None = None
        self._stopped = threading.Event()
        self._beats = threading.Thread(target=self._beat, name="subagents-beat", daemon=True)
        self._beats.start()

    def _beat(self) -> None:
        ray = self._ray
        while not self._stopped.wait(self._beat_s):
            try:
                known = ray.get(self._head.beat.remote(self.node, self.incarnation), timeout=30)
            except ray.exceptions.RayError as exc:  # the head restarting: try again next time
                log.warning("heartbeat failed", node=self.node, error=str(exc)[:200])
                continue
            if not known:  # declared lost (or the head restarted): join again, from nothing
                self.incarnation = ray.get(self._head.register.remote(self.info, self._me))
                log.warning("node host joined again", node=self.node, incarnation=self.incarnation)

    async def watch(self) -> None:
        """Answered only when this host leaves on purpose; its failure tells the head of the
        host's death."""
        if self._left is None:
            self._left = asyncio.Event()
        await self._left.wait()

    async def describe(self) -> dict[str, Any]:
        return {"node": self.node, "incarnation": self.incarnation, "pid": os.getpid()}

    async def leave(self) -> None:
        """Leave the cluster's runtime (nothing hosted any more)."""
        self._stopped.set()
        await self._head.leave.remote(self.node, self.incarnation)
        if self._left is None:
            self._left = asyncio.Event()
        self._left.set()


def host_name(head: str, node: str) -> str:
    return f"{head}-node-{node[:16]}"


def start_node_hosts(*, head: str = HEAD_ACTOR, slots: int = 100) -> dict[str, Any]:
    """One host on every live node (the running one if there is one already): node id ->
    handle. A node that joins later gets its host when the runtime next starts hosts."""
    ray = import_ray()
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    hosts: dict[str, Any] = {}
    for node in ray.nodes():
        if not node.get("Alive"):
            continue
        node_id: str = node["NodeID"]
        hosts[node_id] = (
            ray.remote(NodeHost)
            .options(
                name=host_name(head, node_id),
                namespace=NAMESPACE,
                get_if_exists=True,
                lifetime="detached",
                num_cpus=0,
                max_restarts=-1,
                max_task_retries=0,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
            )
            .remote(head, slots)
        )
    return hosts
