"""Placement: on which node a run goes. A pure decision (no Ray, no clock), so it is tested
with plain calls and the cluster backend only reports to it what starts and ends where.

The rule (docs/cluster.md):

1. A run may need custom resources (a definition's ``resources:``, e.g. ``{gpu: 1}``, the
   names given to ``ray start --resources``): only nodes that offer every one of them, at
   least in that amount, are candidates. None is an error naming what was needed and what
   each node offers; nothing is guessed.
2. Among the candidates, the parent's node if it has a free slot: most mail is between a
   parent and its children, and mail inside a node is a queue put, not a network hop.
3. Else (a root run, a parent's node full, or not a candidate) the least-loaded candidate:
   the most free slots; ties go to the fewest runs, then to the node that joined first (so
   the same state always gives the same answer).
4. When every candidate is full, still the least loaded (by share of its slots in use): the
   cluster-wide limits (``Limits``) decide whether a run may start at all; a node's ``slots``
   only say how to spread what was admitted, so a full cluster over-commits evenly rather
   than refusing work the limits allowed.

Amounts are not consumed: a definition's resources select nodes, like a label. Ray
accounts real resources for Ray actors; a run is a pykka actor inside its node's host.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


class PlacementError(Exception):
    """No node can take the run (no node at all, or none offers what it needs)."""


@dataclass
class NodeLoad:
    """One node as placement sees it."""

    node: str
    slots: int
    """How many runs it hosts before it counts as full (>= 1)."""
    resources: Mapping[str, float] = field(default_factory=dict)
    """The custom resources it offers (name -> amount)."""
    running: int = 0
    order: int = 0
    """When it joined (ties go to the earliest)."""

    @property
    def free(self) -> int:
        return self.slots - self.running

    def offers(self, needs: Mapping[str, float]) -> bool:
        return all(self.resources.get(name, 0.0) >= amount for name, amount in needs.items())


class Placement:
    """The nodes that host runs, their loads, and where the next run goes."""

    def __init__(self) -> None:
        self._nodes: dict[str, NodeLoad] = {}
        self._joined = 0

    def add(self, node: str, slots: int, resources: Mapping[str, float] | None = None) -> None:
        """A node joins (or joins again after a restart: its load starts from zero)."""
        if slots < 1:
            raise ValueError(f"node {node!r}: slots must be at least 1, got {slots}")
        bad = {k: v for k, v in (resources or {}).items() if not v > 0}
        if bad:
            raise ValueError(f"node {node!r}: resource amounts must be positive, got {bad}")
        self._joined += 1
        self._nodes[node] = NodeLoad(node, slots, dict(resources or {}), 0, self._joined)

    def remove(self, node: str) -> None:
        """A node left or was lost: nothing more goes there."""
        self._nodes.pop(node, None)

    def started(self, node: str) -> None:
        """A run started on ``node`` (placed there by ``place`` or restored there)."""
        if node in self._nodes:
            self._nodes[node].running += 1

    def ended(self, node: str) -> None:
        """A run on ``node`` ended (or moved away)."""
        load = self._nodes.get(node)
        if load is not None and load.running > 0:
            load.running -= 1

    def nodes(self) -> list[NodeLoad]:
        return sorted(self._nodes.values(), key=lambda n: n.order)

    def load(self, node: str) -> NodeLoad | None:
        return self._nodes.get(node)

    def place(
        self, parent_node: str | None = None, needs: Mapping[str, float] | None = None
    ) -> str:
        """The node for a new run whose parent runs on ``parent_node`` (None: a root run)."""
        needs = dict(needs or {})
        parent = self._nodes.get(parent_node) if parent_node is not None else None
        if parent is not None and parent.free > 0 and parent.offers(needs):
            return parent.node  # (most children: no list of the nodes made)
        candidates = [n for n in self.nodes() if n.offers(needs)]
        if not candidates:
            raise PlacementError(self._none_offers(needs))
        with_room = [n for n in candidates if n.free > 0]
        if with_room:
            return min(with_room, key=lambda n: (-n.free, n.running, n.order)).node
        return min(candidates, key=lambda n: (n.running / n.slots, n.running, n.order)).node

    def _none_offers(self, needs: Mapping[str, float]) -> str:
        if not self._nodes:
            return "no node hosts runs (the cluster has no live node host)"
        wanted = ", ".join(f"{k}={v:g}" for k, v in sorted(needs.items()))
        offered = "; ".join(f"{n.node}: {_resources(n.resources)}" for n in self.nodes())
        return f"no node offers {wanted} (nodes: {offered})"


def _resources(resources: Mapping[str, float]) -> str:
    return ", ".join(f"{k}={v:g}" for k, v in sorted(resources.items())) or "no custom resources"


def resource_needs(value: object, *, agent: str) -> dict[str, float]:
    """A definition's ``resources:`` (a mapping of resource name to a positive amount) as
    placement needs; a ``ValueError`` naming the agent and what is wrong otherwise."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(
            f"agent {agent!r}: resources must be a mapping of resource name to amount,"
            f" got {type(value).__name__}"
        )
    needs: dict[str, float] = {}
    for name, amount in value.items():
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"agent {agent!r}: resources: a name must be a non-empty string")
        if isinstance(amount, bool) or not isinstance(amount, int | float) or not amount > 0:
            raise ValueError(
                f"agent {agent!r}: resources: {name!r} must be a positive number, got {amount!r}"
            )
        needs[name] = float(amount)
    return needs
