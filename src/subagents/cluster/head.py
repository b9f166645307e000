"""The head: one Ray actor per cluster, named, detached, on the head node. It serves the
cluster's store (``store_service``) and keeps the membership of the node hosts (``liveness``).
The supervisors write through it (group commit kept: a batch is one call, one transaction);
a tree that outlives its driver has its supervisor in a tree host beside it on the head
node (``detached``; docs/cluster.md).

Why these options (Ray's own state actors use the same ones):

- ``lifetime="detached"`` and a name in the ``subagents`` namespace: the store outlives the
  driver that created it, and any process joined to the cluster (a node, the CLI) finds it
  with ``ray.get_actor``;
- ``resources={"node:__internal_head__": 0.001}``: always on the head node, where the file
  is (a restart brings it back there, on the same file);
- ``max_restarts=-1``: if its worker process dies, Ray starts it again (the constructor
  reopens the file: SQLite lost nothing committed; the node hosts register again when their
  heartbeat is refused);
- ``max_task_retries=0``: a write whose worker died mid-call is not re-sent behind the
  caller's back (it may have been committed: appending an event twice is a wrong record);
  the caller gets a ``StoreError`` saying so;
- ``num_cpus=0``: it holds no CPU slot the runs' hosts need.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from subagents.cluster.connect import HEAD_ACTOR, NAMESPACE, ClusterError, import_ray
from subagents.cluster.liveness import Liveness
from subagents.cluster.membership import Lost, Member, NodeInfo
from subagents.cluster.store_service import (
    PROTOCOL,
    StoreCall,
    StoreInfo,
    StoreService,
    caller_protocol,
)

HEAD_RESOURCE = "node:__internal_head__"
"""The resource only the head node has (Ray's convention for head-pinned actors)."""


class Head:
    """The actor's class: a ``StoreService`` over the head's ``SQLiteStore``, and the node
    hosts' membership."""

    def __init__(self, path: str | None, heartbeat_timeout_s: float = 15.0) -> None:
        from subagents.store.sqlite import SQLiteStore

        self.service = StoreService(SQLiteStore(Path(path) if path else None))
        self.lost: list[Lost] = []
        """Every loss reported, in order (phase B: the supervisor takes up their runs)."""
        self.liveness = Liveness(
            import_ray(), on_lost=self.lost.append, timeout_s=heartbeat_timeout_s
        )

    # ---- node hosts ------------------------------------------------------------------------

    def register(self, info: NodeInfo, host: Any, protocol: int | None = None) -> int:
        caller_protocol(protocol)
        return self.liveness.register(info, host)

    def beat(self, node: str, incarnation: int) -> bool:
        return self.liveness.beat(node, incarnation)

    def leave(self, node: str, incarnation: int) -> bool:
        return self.liveness.leave(node, incarnation)

    def members(self) -> list[Member]:
        return self.liveness.members()

    def losses(self) -> list[Lost]:
        return list(self.lost)

    # ---- the store -------------------------------------------------------------------------

    # Each call says its caller's protocol last (``store_service.caller_protocol``): one
    # that says none (a process of before session 27) is refused by name. ``protocol``
    # itself is what a caller asks first, of any version.

    def info(self, protocol: int | None = None) -> StoreInfo:
        caller_protocol(protocol)
        return self.service.info()

    def protocol(self) -> int:
        return self.service.protocol()

    def write(self, calls: Sequence[StoreCall], protocol: int | None = None) -> None:
        caller_protocol(protocol)
        self.service.write(calls)

    def call(self, call: StoreCall, protocol: int | None = None) -> Any:
        caller_protocol(protocol)
        return self.service.call(call)

    def list_runs_sparing(
        self, call: StoreCall, held: Sequence[StoreCall] = (), protocol: int | None = None
    ) -> Any:
        caller_protocol(protocol)
        return self.service.list_runs_sparing(call, held)

    def write_then(
        self, held: Sequence[StoreCall], call: StoreCall, protocol: int | None = None
    ) -> Any:
        caller_protocol(protocol)
        return self.service.write_then(held, call)

    def read_within(
        self, held: Sequence[StoreCall], call: StoreCall, protocol: int | None = None
    ) -> Any:
        caller_protocol(protocol)
        return self.service.read_within(held, call)


def head_actor(
    *,
    name: str = HEAD_ACTOR,
    path: str | None = None,
    create: bool = True,
    heartbeat_timeout_s: float = 15.0,
    kind: type[Head] | None = None,
) -> Any:
    """The handle of the head actor ``name``: the running one, or (``create``) a new one
    serving ``path`` (None: the default state file of the head's user, ``store.paths``),
    of class ``kind`` (None: ``Head``; a subclass: a test's head that holds a write).

    A running store keeps the file it was started with: asking for another ``path`` is an
    error naming both, never a silent switch to another file."""
    ray = import_ray()
    if not create:
        try:
            return ray.get_actor(name, namespace=NAMESPACE)
        except ValueError as exc:
            raise ClusterError(
                f"no subagents store {name!r} on this Ray cluster (namespace {NAMESPACE!r}):"
                " start a runtime on it first (Runtime(cluster=...), subagents run --ray)"
            ) from exc
    actor = (
        ray.remote(kind or Head)
        .options(
            name=name,
            namespace=NAMESPACE,
            get_if_exists=True,
            lifetime="detached",
            num_cpus=0,
            resources={HEAD_RESOURCE: 0.001},
            max_restarts=-1,
            max_task_retries=0,
        )
        .remote(path, heartbeat_timeout_s)
    )
    if path is not None:
        refuse_another_protocol(actor, lambda send, _: ray.get(send()), name)  # (first: below)
        info: StoreInfo = ray.get(actor.info.remote(PROTOCOL))
        if Path(info.path) != Path(path):
            raise ClusterError(
                f"the cluster's store {name!r} serves {info.path}, not {path}: give that path,"
                " or another store name"
            )
    return actor


def refuse_another_protocol(
    actor: Any, ask: Callable[[Callable[[], Any], str], Any], name: str
) -> None:
    """A ``ClusterError`` naming both versions when the head serving the store speaks another
    protocol than this process (``store_service.PROTOCOL``): a detached head outlives the
    driver that started it, and mixed versions misread each other (a read the head does not
    know refused at every try, a row's data of another shape), so they are refused at once."""
    try:
        asked = actor.protocol
    except AttributeError:  # (a head of before session 27: no such method)
        theirs = None
    else:
        theirs = ask(asked.remote, "protocol")
    if theirs == PROTOCOL:
        return
    said = (
        "a subagents older than this one (no protocol version)"
        if theirs is None
        else f"protocol {theirs}"
    )
    raise ClusterError(
        f"the cluster's store {name!r} is served by a head running {said}; this process runs"
        f" protocol {PROTOCOL}: a head and the processes using it must run the same subagents."
        f" Stop the older side: the head is the detached actor {name!r} (namespace"
        f" {NAMESPACE!r}: `ray stop` on the cluster, or ray.kill of it once no runtime uses it;"
        " its file keeps every run), then start it with the same version as this process"
    )
