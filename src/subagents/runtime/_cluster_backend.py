"""ClusterBackend: what the runtime asks of a cluster it hosts its runs on, as a protocol.

Why a protocol here: ``cluster/`` sits below the runtime (docs/architecture.md) and must
not import it; the runtime states what it needs of a cluster, ``cluster/backend.py``
(``RayBackend``) does it without importing anything of the runtime, and ``ray_backend``
below is the one place the runtime reaches ``cluster/`` (``Runtime(cluster=...)`` goes
through it). Whatever the nodes need of the runtime's own code (how to run an agent's
runs) is handed to the backend as a function, never imported by it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from subagents.actors.agent import BehaviourFactory
from subagents.actors.remote import NodeMail
from subagents.behaviour.port import AgentEnv
from subagents.definitions.spec import AgentSpec
from subagents.store.base import RunStore
from subagents.store.writes import RecordMail
from subagents.telemetry import FinishedCall

BehavioursFor = Callable[
    [Mapping[str, Callable[..., Any]], AgentEnv], Callable[[AgentSpec], BehaviourFactory]
]
"""(function agents, agent environment) -> how to run each agent's runs
(``_assembly.behaviours``): called on each node, with the node's own services."""


class NodeHosts(Protocol):
    """The node hosts of one runtime: its runs live there."""

    def effector(self, **kwargs: Any) -> Any:
        """The supervisor's effector (``SupervisorActor(effector=...)``)."""
        ...

    def connect(self) -> None:
        """Start taking what the nodes' agents send (after the supervisor started)."""
        ...

    def lease_line(self, left: Callable[[], float | None]) -> None:
        """Its nodes' commands die by the runtime's lease line, which has ``left()``
        seconds left (``tools/lease_line.py``)."""
        ...

    def placements(self) -> dict[str, list[str]]:
        """Run id -> the nodes its starts were placed on, in order."""
        ...

    def close(self, timeout: float = 10.0) -> None:
        """End every node host (every run was cancelled first)."""
        ...


class ClusterBackend(Protocol):
    """A cluster a runtime may host its runs on."""

    def join(self, cluster: str | None) -> str | None:
        """The address of the cluster ``cluster`` names (or the environment does), joined
        by this process; None: no cluster, the runs stay in this process."""
        ...

    def store(self, address: str) -> RunStore:
        """The cluster's one store (served on its head; started there if none runs)."""
        ...

    def node_hosts(
        self,
        owner: str,
        functions: Mapping[str, Callable[..., Any]],
        env: AgentEnv,
        behaviours_for: BehavioursFor,
        *,
        registry: Any,
        definitions: Callable[[], Sequence[AgentSpec]] | None,
        on_call: Callable[[FinishedCall], None] | None,
        mail: NodeMail | None = None,
        record_mail: RecordMail | None = None,
    ) -> NodeHosts:
        """One node host per node, set up with what runs need; ``registry`` and
        ``definitions``: reloaded definitions are pushed to the nodes; ``on_call``: where
        the spans of the nodes' calls go; ``mail``: mail between a node's runs goes straight
        there (None: by the supervisor), its senders' records written by ``record_mail``
        when they record it; ``env.remembered`` answers the nodes' runs too."""
        ...

    def on_every_node(self, fn: Callable[..., Any], *args: Any, timeout: float) -> list[Any]:
        """``fn(*args)`` run on each live node (where runs are hosted), the results in a
        list; the error ``fn`` raised on a node raised as it was, any other failure (a node
        that did not run it in ``timeout`` seconds) an error too: no node left unchecked."""
        ...


def ray_backend() -> ClusterBackend:
    """The Ray cluster backend (``pip install 'subagents[ray]'``), imported only when a
    runtime is asked for a cluster."""
    from subagents.cluster.backend import RayBackend

    return RayBackend()
