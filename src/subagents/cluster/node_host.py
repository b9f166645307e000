"""NodeHost: one Ray actor per node, the home of the runs placed on that node.

It hosts the agent actors of the runs placed on its node (``actors.remote.NodeRuns``, a
pykka runtime of its own): a runtime hands it, once, what runs need (``setup``: the
definitions, the model, the tools, the function agents) and connects to it (``cluster.link``:
one socket per set-up, over which the supervisor's effects for its runs arrive in order and
what its agents tell and ask the supervisor goes back as it is queued).

A host of the cluster (``start_node_hosts``) also registers with the head and beats; the
head keeps a ``watch`` call pending on it, answered only when it leaves on purpose, which is
how the head learns of its death at once (``liveness``). A runtime's own hosts
(``start_runtime_hosts``) do not: their runtime learns of a death from its link closing.

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
from collections.abc import Callable
from typing import Any

import structlog

from subagents.cluster.connect import HEAD_ACTOR, NAMESPACE, import_ray
from subagents.cluster.membership import NodeInfo
from subagents.cluster.store_service import PROTOCOL
from subagents.tools import detached as detached_reapers

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

    def __init__(
        self, head: str | None = HEAD_ACTOR, slots: int = 100, beat_s: float = BEAT_S
    ) -> None:
        ray = import_ray()
        self._ray = ray
        detached_reapers.allow()  # Ray kills this worker's children when it ends it
        context = ray.get_runtime_context()
        self.node: str = context.get_node_id()
        self._me = context.current_actor
        resources: dict[str, float] = {}
        for node in ray.nodes():
            if node.get("NodeID") == self.node:
                resources = custom_resources(dict(node.get("Resources", {})))
        self.info = NodeInfo(
            node=self.node, host=socket.gethostname(), slots=slots, resources=resources
        )
        self._runs: Any = None
        self._link: Any = None
        self._kit: Any = None
        self._closed = False
        self._in_order = InOrder()
        self._applied = threading.Condition()
        self._left: asyncio.Event | None = None
        self._stopped = threading.Event()
        self.incarnation = 0
        if head is None:  # a runtime's own host: its runtime watches it
            return
        self._head = ray.get_actor(head, namespace=NAMESPACE)
        self.incarnation = ray.get(self._head.register.remote(self.info, self._me, PROTOCOL))
        self._beat_s = beat_s
        self._beats = threading.Thread(target=self._beat, name="subagents-beat", daemon=True)
        self._beats.start()

    # ---- hosting runs --------------------------------------------------------------------

    async def setup(
        self, kit: Any, authkey: bytes, ports: tuple[int, int] | None = None, tls: Any = None
    ) -> dict[str, Any]:
        """Get ready to host runs: ``kit`` (``cluster.kit.NodeKit``) says how to run each
        agent; the answer says where the runtime's link connects (``cluster.link``, one
        connection, ``authkey``; on a port of ``ports`` when given; over TLS with the files
        ``tls`` names, a ``cluster.link_tls.LinkTls``, read on this machine). Again after a
        restart (the process is new: it hosts nothing from before)."""
        from subagents.actors.remote import NodeRuns, Told
        from subagents.cluster.link import NodeLink

        self._close_runs()
        self._closed = False
        made: list[NodeRuns] = []  # the rules are asked over the runs' link, made next

        def remembered(root_run_id: str) -> tuple[str, ...]:
            return made[0].remembered(root_run_id) if made else ()

        runs = NodeRuns(kit.behaviour_for(remembered), kit.mail)
        made.append(runs)
        if kit.tracer is not None:  # finished calls' spans go to the driver with the reports
            kit.tracer.sink = lambda call: runs.outbox.put(Told(call))
        self._in_order = InOrder()
        self._runs = runs
        self._link = NodeLink(
            self._ray.util.get_node_ip_address(),
            authkey,
            deliver=self._delivered,
            answer=runs.supervisor.answer,
            take=runs.outbox.take,
            definitions=kit.definitions,
            ports=ports,
            tls=tls,
        )
        self._kit = kit
        # the driver's lease line, for the node's commands: once the link is made (a set-up
        # that failed before left its asking thread running for good: review, session 29)
        kit.keep_lease(runs.lease_left)
        return {
            "node": self.node,
            "pid": os.getpid(),
            "info": self.info,
            "link": self._link.address,
            "tls": tls is not None,
        }

    def _delivered(self, seq: int, effects: list[Any]) -> None:
        """The supervisor's ``seq``-th batch of effects for the runs here (counted from 1
        after each ``setup``), from the link's reader: carried out in order."""
        runs = self._runs
        if runs is None:  # closing: what still comes has no run here
            return
        for batch in self._in_order.arrived(seq, effects):
            runs.deliver(batch)
        with self._applied:
            self._applied.notify_all()

    async def live(self, after: int = 0, wait_s: float = 60.0) -> list[str]:
        """The runs whose agents live here once the first ``after`` batches were applied
        (this call may overtake what the link still carries: it waits for them)."""

        def applied() -> bool:
            with self._applied:
                return self._applied.wait_for(lambda: self._in_order.applied >= after, wait_s)

        if not await asyncio.to_thread(applied):
            raise TimeoutError(f"node host {self.node[:12]}: batch {after} not applied")
        return self._runs.live() if self._runs is not None else []

    async def close(self) -> None:
        """Stop every agent hosted here (the runtime is closing)."""
        self._closed = True
        await asyncio.to_thread(self._close_runs)

    def _close_runs(self) -> None:
        link, self._link = self._link, None
        runs, self._runs = self._runs, None
        if link is not None:
            link.close()
        if runs is not None:
            runs.close()
        kit, self._kit = self._kit, None
        if kit is not None:  # the node's tools' processes, MCP servers, worktrees
            kit.close_services()

    # ---- membership ----------------------------------------------------------------------

    def _beat(self) -> None:
        ray = self._ray
        while not self._stopped.wait(self._beat_s):
            try:
                known = ray.get(self._head.beat.remote(self.node, self.incarnation), timeout=30)
            except ray.exceptions.RayError as exc:  # the head restarting: try again next time
                log.warning("heartbeat failed", node=self.node, error=str(exc)[:200])
                continue
            if not known:  # declared lost (or the head restarted): join again, from nothing
                self.incarnation = ray.get(
                    self._head.register.remote(self.info, self._me, PROTOCOL)
                )
                log.warning("node host joined again", node=self.node, incarnation=self.incarnation)

    async def watch(self) -> None:
        """Answered only when this host leaves on purpose; its failure tells the head of the
        host's death."""
        if self._left is None:
            self._left = asyncio.Event()
        await self._left.wait()

    async def describe(self) -> dict[str, Any]:
        """Which process this is, where its link listens, and how many threads it runs (a
        waiting run holds none)."""
        return {
            "node": self.node,
            "incarnation": self.incarnation,
            "pid": os.getpid(),
            "threads": threading.active_count(),
            "definitions": self._kit.version if self._kit is not None else None,
            "runs": len(self._runs.live()) if self._runs is not None else 0,
            "lease": self._kit is not None
            and self._kit.lease is not None
            and self._kit.lease.given,
            "link": self._link.address if self._link is not None else None,
            "tls": self._link is not None and self._link.tls,
        }

    async def leave(self) -> None:
        """Leave the cluster's runtime (nothing hosted any more)."""
        self._stopped.set()
        if self.incarnation:
            await self._head.leave.remote(self.node, self.incarnation)
        if self._left is None:
            self._left = asyncio.Event()
        self._left.set()


class InOrder:
    """Numbered batches, released in their order whatever order they arrive in."""

    def __init__(self) -> None:
        self._next = 1
        self._early: dict[int, list[Any]] = {}

    def arrived(self, seq: int, batch: list[Any]) -> list[list[Any]]:
        """The batches that may go now (none while one before ``seq`` is missing)."""
        if seq < self._next or seq in self._early:
            raise ValueError(f"batch {seq} arrived twice")
        self._early[seq] = batch
        ready: list[list[Any]] = []
        while self._next in self._early:
            ready.append(self._early.pop(self._next))
            self._next += 1
        return ready

    @property
    def applied(self) -> int:
        """How many batches were released so far."""
        return self._next - 1


def host_name(head: str, node: str) -> str:
    return f"{head}-node-{node[:16]}"


def start_node_hosts(*, head: str = HEAD_ACTOR, slots: int = 100) -> dict[str, Any]:
    """One host on every live node (the running one if there is one already): node id ->
    handle. A node that joins later gets its host when the runtime next starts hosts."""
    return _host_per_node(
        lambda node: host_name(head, node),
        (head, slots),
        get_if_exists=True,
        lifetime="detached",
    )


def runtime_host_name(owner: str, node: str) -> str:
    return f"subagents-{owner}-node-{node[:16]}"


def start_runtime_hosts(owner: str, *, slots: int = 100) -> dict[str, Any]:
    """One host on every live node for the runtime ``owner``: node id -> handle.

    Not detached: they belong to the driver that runs the runtime and end with it (its
    supervisor is there). Restarted by Ray when their process dies (``max_restarts=-1``), as
    new processes hosting nothing: the runtime sets them up again. A call in flight when a
    host died is not re-sent (``max_task_retries=0``): the runtime decides what to redo."""
    return _host_per_node(lambda node: runtime_host_name(owner, node), (None, slots))


def _host_per_node(
    name: Callable[[str], str], args: tuple[Any, ...], **options: Any
) -> dict[str, Any]:
    """A ``NodeHost`` pinned to every live node, named ``name(node_id)``: node id -> handle.
    Restarted by Ray when its process dies; a call in flight then is not re-sent."""
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
                name=name(node_id),
                namespace=NAMESPACE,
                num_cpus=0,
                max_restarts=-1,
                max_task_retries=0,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
                **options,
            )
            .remote(*args)
        )
    return hosts
