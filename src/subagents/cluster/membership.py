"""Membership: which node hosts are part of the cluster's runtime, and which were lost.

A pure record (no Ray, the time passed in), so that the rule "each loss is acted on once"
is tested with plain calls. Three signals say a node host is gone, and all come here:

- Ray tells the head that the host's actor died (its worker was killed, its node removed):
  ``lost(...)``, the fast path;
- its heartbeats stop (a hung process, a network split that Ray has not decided on yet):
  ``expired(now)``, the slow path, after ``timeout_s``;
- it registers again with a new incarnation (Ray restarted its actor: the constructor ran
  again and everything it hosted in memory is gone): ``join`` reports the old incarnation lost.

Whichever comes first reports the loss; the others find nothing more to report (the
incarnation is no longer a member). The caller takes up the lost incarnation's runs from the
store, once. A heartbeat or a report from a lost incarnation is refused (``beat`` says
False): it must register again and host nothing from before.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec


class NodeInfo(msgspec.Struct, frozen=True, kw_only=True):
    """What a node host says about itself when it registers."""

    node: str
    """The Ray node id (hex) it runs on: where placement puts runs."""
    host: str = ""
    """The machine's name, for people."""
    slots: int = 100
    """How many runs it hosts before placement prefers other nodes."""
    resources: dict[str, float] = msgspec.field(default_factory=dict)
    """Its node's custom resources (``ray start --resources``): what definitions may require."""


class Member(msgspec.Struct, frozen=True, kw_only=True):
    """A registered node host: its info, its incarnation, its last heartbeat."""

    info: NodeInfo
    incarnation: int
    joined_at: float
    seen_at: float


class Lost(msgspec.Struct, frozen=True, kw_only=True):
    """A node host's incarnation is gone; its runs must be taken up elsewhere."""

    node: str
    incarnation: int
    reason: str


class Membership:
    """The registered node hosts; each loss of one is reported exactly once."""

    def __init__(self, *, timeout_s: float = 15.0) -> None:
        if not timeout_s > 0:
            raise ValueError(f"heartbeat timeout must be positive, got {timeout_s!r}")
        self.timeout_s = timeout_s
        self._members: dict[str, Member] = {}
        self._next = 0

    def join(self, info: NodeInfo, now: float) -> tuple[int, Lost | None]:
        """Register a node host; its new incarnation, and the loss of the node's previous
        incarnation if it was still a member (a restarted host: its old self is gone)."""
        if info.slots < 1:
            raise ValueError(f"node {info.node!r}: slots must be at least 1, got {info.slots}")
        previous = self._members.pop(info.node, None)
        lost = None
        if previous is not None:
            lost = Lost(
                node=info.node,
                incarnation=previous.incarnation,
                reason="its host registered again (restarted)",
            )
        self._next += 1
        self._members[info.node] = Member(
            info=info, incarnation=self._next, joined_at=now, seen_at=now
        )
        return self._next, lost

    def beat(self, node: str, incarnation: int, now: float) -> bool:
        """A heartbeat; False if that incarnation is not a member (lost, or never was)."""
        member = self._members.get(node)
        if member is None or member.incarnation != incarnation:
            return False
        self._members[node] = msgspec.structs.replace(member, seen_at=max(member.seen_at, now))
        return True

    def is_member(self, node: str, incarnation: int) -> bool:
        member = self._members.get(node)
        return member is not None and member.incarnation == incarnation

    def lost(self, node: str, incarnation: int, reason: str) -> Lost | None:
        """Ray says this incarnation died: its loss, or None if already reported."""
        if not self.is_member(node, incarnation):
            return None
        del self._members[node]
        return Lost(node=node, incarnation=incarnation, reason=reason)

    def leave(self, node: str, incarnation: int) -> bool:
        """A host that closes on purpose (after handing its runs back): no loss to report."""
        if not self.is_member(node, incarnation):
            return False
        del self._members[node]
        return True

    def expired(self, now: float) -> list[Lost]:
        """The members whose last heartbeat is older than ``timeout_s``: removed, reported."""
        late = [m for m in self._members.values() if now - m.seen_at > self.timeout_s]
        for m in late:
            del self._members[m.info.node]
        return [
            Lost(
                node=m.info.node,
                incarnation=m.incarnation,
                reason=f"no heartbeat for {now - m.seen_at:.1f} s (timeout {self.timeout_s:g} s)",
            )
            for m in late
        ]

    def members(self) -> list[Member]:
        """The live members, in the order they (last) joined."""
        return sorted(self._members.values(), key=lambda m: m.incarnation)

    def member(self, node: str) -> Member | None:
        return self._members.get(node)

    def resources(self) -> Mapping[str, Mapping[str, float]]:
        return {m.info.node: m.info.resources for m in self.members()}
