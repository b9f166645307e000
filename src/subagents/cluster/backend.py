"""RayBackend: the runtime's cluster backend on Ray (``runtime/_cluster_backend.py``'s
``ClusterBackend`` protocol, met without importing the runtime).

Why apart from ``hosting.py``: this is the whole of what the runtime asks of ``cluster/``
(join, the store, the node hosts); everything else of the package stays behind it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from subagents.actors.agent import BehaviourFactory
from subagents.actors.remote import NodeMail
from subagents.behaviour.port import AgentEnv
from subagents.cluster.connect import RAY_ADDRESS_ENV, connect, resolve_address
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
