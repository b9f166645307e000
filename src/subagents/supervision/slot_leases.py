"""Leases of slots: how a cluster's nodes could admit runs on their own without breaking a
cluster-wide concurrency limit. A design, as pure classes; NOT wired into the runtime yet.

Why: on a cluster every spawn goes to the one supervisor and back (docs/cluster.md), two Ray
hops on the spawn path. A node holding a lease of slots could start a child on its own node
at once, and tell the supervisor afterwards, in the reports it sends anyway. The limit holds
because the supervisor never lends out more than it has:

    slots used centrally + slots leased to nodes <= the limit

- ``SlotLender`` (the supervisor's side): lends each node up to what it asks, from what is
  free; takes back what a node returns; and when a node is lost, its whole lease comes back
  (the runs it hosted are started again elsewhere, through the supervisor, under slots of
  their own). Each lease has an ``epoch``: a return or a report from a lease that was taken
  back (a node that was declared lost but was not dead) is refused, so nothing is counted
  twice.
- ``LeasedSlots`` (a node's side): takes a slot from its lease for a local start, gives it
  back when the run ends, says when to ask for more (below ``low``) and how many spare slots
  to give back (above ``high``), so that an idle node does not sit on slots another needs.

Per-agent, per-tier and per-parent limits are not leased: a spawn that touches one of them
still goes to the supervisor (the common case of a fan-out under one parent is exactly a
per-parent and per-agent limit, so this design shortens spawns only where no such limit
applies).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Lease:
    """``slots`` lent to ``node`` under ``epoch`` (a new epoch each time the node's lease is
    taken back and lent again)."""

    node: str
    slots: int
    epoch: int


class SlotLender:
    """The supervisor's side: the limit, what it uses itself, what it lent to each node."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"the slot limit must be at least 1, got {limit}")
        self.limit = limit
        self.central = 0
        """Slots in use by runs the supervisor admitted itself."""
        self._leases: dict[str, Lease] = {}
        self._epochs: dict[str, int] = {}

    @property
    def lent(self) -> int:
        return sum(lease.slots for lease in self._leases.values())

    @property
    def free(self) -> int:
        return self.limit - self.central - self.lent

    def take_central(self) -> bool:
        """A slot for a run the supervisor admits itself; False when none is free."""
        if self.free < 1:
            return False
        self.central += 1
        return True

    def release_central(self) -> None:
        if self.central < 1:
            raise ValueError("no central slot is in use")
        self.central -= 1

    def lend(self, node: str, want: int) -> Lease:
        """Lend ``node`` up to ``want`` more slots (what is free); its lease as it is now."""
        if want < 0:
            raise ValueError(f"node {node!r}: cannot ask for {want} slots")
        current = self._leases.get(node)
        epoch = current.epoch if current is not None else self._epochs.get(node, 0) + 1
        self._epochs[node] = epoch
        extra = min(want, max(0, self.free))
        lease = Lease(node, (current.slots if current else 0) + extra, epoch)
        self._leases[node] = lease
        return lease

    def give_back(self, node: str, epoch: int, slots: int) -> bool:
        """``node`` returns ``slots`` of its lease of ``epoch``; False (nothing changes) when
        that lease was taken back meanwhile, or it returns more than it holds."""
        current = self._leases.get(node)
        if current is None or current.epoch != epoch or not 0 <= slots <= current.slots:
            return False
        left = current.slots - slots
        if left:
            self._leases[node] = Lease(node, left, epoch)
        else:
            del self._leases[node]
        return True

    def take_back(self, node: str) -> int:
        """``node`` is lost: its whole lease is free again (its runs are started elsewhere
        under slots of their own); how many slots came back. Its next lease has a new
        epoch."""
        lease = self._leases.pop(node, None)
        return lease.slots if lease is not None else 0

    def lease(self, node: str) -> Lease | None:
        return self._leases.get(node)


class LeasedSlots:
    """A node's side: the slots of its lease, how many are in use, when to ask or return."""

    def __init__(self, lease: Lease, *, low: int = 2, high: int = 8) -> None:
        if not 0 <= low < high:
            raise ValueError(f"need 0 <= low < high, got low={low}, high={high}")
        self.lease = lease
        self.used = 0
        self.low = low
        self.high = high

    @property
    def spare(self) -> int:
        return self.lease.slots - self.used

    def take(self) -> bool:
        """A slot for a local start; False when the lease is used up (ask the supervisor)."""
        if self.spare < 1:
            return False
        self.used += 1
        return True

    def release(self) -> None:
        if self.used < 1:
            raise ValueError("no leased slot is in use")
        self.used -= 1

    def renewed(self, lease: Lease) -> None:
        """The supervisor's answer to ``wanted`` (or ``returning``): the lease as it is now.
        A lease of another epoch replaces this one only when it is newer (an old answer
        arriving late changes nothing)."""
        if lease.epoch < self.lease.epoch:
            return
        self.lease = lease

    def wanted(self) -> int:
        """How many more slots to ask for (0: enough spare)."""
        return self.high - self.spare if self.spare < self.low else 0

    def returning(self) -> int:
        """How many spare slots to give back (0: keep them)."""
        return self.spare - self.high if self.spare > self.high else 0

    def returned(self, slots: int) -> None:
        """``slots`` were given back (``SlotLender.give_back`` said yes)."""
        if not 0 <= slots <= self.spare:
            raise ValueError(f"cannot return {slots} slots with {self.spare} spare")
        self.lease = Lease(self.lease.node, self.lease.slots - slots, self.lease.epoch)
