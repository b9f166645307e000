"""RayBackend: the runtime's cluster backend on Ray (``runtime/_cluster_backend.py``'s
``ClusterBackend`` protocol, met without importing the runtime).

Why apart from ``hosting.py``: this is the whole of what the runtime asks of ``cluster/``
(join, the store, the node hosts, a check run on every node); everything else of the
package stays behind it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from subagents.actors.agent import BehaviourFactory
from subagents.actors.remote import NodeMail
from subagents.behaviour.port import AgentEnv
from subagents.cluster.connect import (
    RAY_ADDRESS_ENV,
    ClusterError,
    connect,
    import_ray,
    resolve_address,
)
from subagents.definitions.spec import AgentSpec
from subagents.store.base import RunStore
from subagents.store.writes import RecordMail
from subagents.telemetry import FinishedCall

if TYPE_CHECKING:
    from subagents.cluster.hosting import ClusterHosting


class RayBackend:
    """Runs hosted on the Ray cluster this process joins as a driver."""

    def join(self, cluster: str | None) -> str | None:
        """The Ray cluster a runtime hosts its runs on (``cluster``, else
        ``$SUBAGENTS_RAY_ADDRESS``), joined by this process as a driver; None: none, the
        runs stay in this process."""
        if cluster is None and not os.environ.get(RAY_ADDRESS_ENV):
            return None
        address = resolve_address(cluster)
        if address is not None:
            connect(address)
        return address

    def store(self, address: str) -> RunStore:
        """The store of the cluster at ``address``, served on its head (started there if no
        runtime did yet)."""
        from subagents.cluster.remote_store import ClusterStore

        return ClusterStore.connect(address, create=True)

    def node_hosts(
        self,
        owner: str,
        functions: Mapping[str, Callable[..., Any]],
        env: AgentEnv,
        behaviours_for: Callable[
            [Mapping[str, Callable[..., Any]], AgentEnv], Callable[[AgentSpec], BehaviourFactory]
        ],
        *,
        registry: Any,
        definitions: Callable[[], Sequence[AgentSpec]] | None,
        on_call: Callable[[FinishedCall], None] | None,
        mail: NodeMail | None = None,
        record_mail: RecordMail | None = None,
    ) -> ClusterHosting:
        """One node host per node of the cluster (``hosting.ClusterHosting``), each set up
        with what runs need (``kit.NodeKit``: the function agents, the agent environment,
        the definitions as they are now, ``behaviours_for`` to run them with, how mail
        between a node's runs goes: ``mail``, its senders' records written by
        ``record_mail``); the rules remembered for a tree are read from the driver's store
        for the nodes (``env.remembered``)."""
        from subagents.cluster.hosting import ClusterHosting
        from subagents.cluster.kit import NodeKit

        return ClusterHosting(
            owner,
            NodeKit(functions, env, env.agents(), behaviours_for, mail),
            registry=registry,
            definitions=definitions,
            on_call=on_call,
            record_mail=record_mail,
            remembered=env.remembered,
        )

    def on_every_node(self, fn: Callable[..., Any], *args: Any, timeout: float) -> list[Any]:
        """``fn(*args)`` in a task pinned to each live node (where the node hosts of a
        runtime go: ``node_host._host_per_node``), the results in the nodes' order; the
        error ``fn`` raised on a node raised here as it was; ``ClusterError`` when a node
        did not run it (its task lost, no answer within ``timeout`` seconds)."""
        ray = import_ray()
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        task = ray.remote(fn)
        nodes = [node["NodeID"] for node in ray.nodes() if node.get("Alive")]
        if not nodes:
            raise ClusterError("the Ray cluster has no live node")
        refs = [
            task.options(
                num_cpus=0,
                max_retries=0,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False),
            ).remote(*args)
            for node in nodes
        ]
        try:
            return list(ray.get(refs, timeout=timeout))
        except ray.exceptions.RayTaskError as exc:
            if isinstance(exc.cause, Exception):
                raise exc.cause from None
            raise ClusterError(f"{fn.__name__} failed on a node: {exc}") from exc
        except (ray.exceptions.RayError, TimeoutError) as exc:
            raise ClusterError(f"{fn.__name__} did not run on every node: {exc}") from exc
