"""Liveness: the head's watch over the node hosts, turning Ray's signals into ``Lost``.

Why a thread with a table of pending calls: Ray has no public "tell me when this actor dies"
callback, but a call in flight on an actor fails (``RayActorError``) as soon as the actor's
process dies or its node is removed. So the head keeps one ``watch()`` call pending on each
registered node host (the host answers it only when it leaves); ``ray.wait`` on all of them
wakes this thread at once when one fails. The same loop checks heartbeats every ``tick_s``
for the cases Ray is slow to decide (a hung host, a network split). ``Membership`` makes sure
each loss is reported once whichever signal comes first.

A watch that fails with ``ActorUnavailableError`` is made again at the next tick, not taken
for a death: Ray says so of an actor only unavailable for now (restarting, or its connection
being made again), and the head's handle may still see a host as restarting for a moment
after its new process registered. Taken for a death, that failure of the new incarnation's
first watch reported the live host lost (its runs taken up elsewhere, the host made to join
again: session 31, a loaded run). A host that really died is lost all the same, if later: a
host's process killed (restarted by Ray, ``max_restarts=-1``: never ``ActorDiedError``) by its
next incarnation's ``join`` (its restart's time, ~1 s); its node gone by Ray's refusal to
place it again (``ActorUnschedulableError``, on the watch made again); a restart that never
ends by its heartbeats' end (``timeout_s``: tests/cluster/test_liveness_unavailable.py).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import structlog

from subagents.cluster.membership import Lost, Membership, NodeInfo

log = structlog.get_logger("subagents.cluster")

TICK_S = 0.5
"""How often heartbeats are checked (and the watch list refreshed) at the latest."""


class Liveness:
    """The membership of node hosts, watched; ``on_lost`` hears of each loss once."""

    def __init__(
        self,
        ray: Any,
        *,
        on_lost: Callable[[Lost], None],
        timeout_s: float = 15.0,
        tick_s: float = TICK_S,
        now: Callable[[], float] = time.time,
    ) -> None:
        self._ray = ray
        self._on_lost = on_lost
        self._now = now
        self._tick_s = tick_s
        self._lock = threading.Lock()
        self.membership = Membership(timeout_s=timeout_s)
        self._watches: dict[Any, tuple[str, int]] = {}
        self._hosts: dict[tuple[str, int], Any] = {}
        """Each member's host handle, by (node, incarnation): to make its watch again."""
        self._again: dict[tuple[str, int], float] = {}
        """Watches to make again (their host was unavailable for now), by when."""
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="subagents-liveness", daemon=True)
        self._thread.start()

    def register(self, info: NodeInfo, host: Any) -> int:
        """A node host joins: its incarnation. A previous incarnation of it is lost."""
        with self._lock:
            incarnation, lost = self.membership.join(info, self._now())
            self._hosts[(info.node, incarnation)] = host
            self._watch(info.node, incarnation)
        log.info("node host joined", node=info.node, host=info.host, incarnation=incarnation)
        if lost is not None:
            self._report(lost)
        return incarnation

    def beat(self, node: str, incarnation: int) -> bool:
        with self._lock:
            return self.membership.beat(node, incarnation, self._now())

    def leave(self, node: str, incarnation: int) -> bool:
        with self._lock:
            return self.membership.leave(node, incarnation)

    def members(self) -> list[Any]:
        with self._lock:
            return self.membership.members()

    def close(self) -> None:
        self._closed.set()
        self._thread.join(timeout=5)

    def _watch(self, node: str, incarnation: int) -> None:
        """One pending ``watch()`` call on the host of ``(node, incarnation)`` (holding the
        lock)."""
        host = self._hosts[(node, incarnation)]
        self._watches[host.watch.options(max_task_retries=0).remote()] = (node, incarnation)

    def _loop(self) -> None:
        ray = self._ray
        while not self._closed.is_set():
            with self._lock:
                now = time.monotonic()
                for who, due in list(self._again.items()):
                    if due <= now:
                        del self._again[who]
                        self._watch(*who)
                pending = list(self._watches)
                wait_s = min([self._tick_s, *(due - now for due in self._again.values())])
            if pending:
                done, _ = ray.wait(pending, num_returns=1, timeout=max(wait_s, 0.0))
            else:
                self._closed.wait(self._tick_s)
                done = []
            lost: list[Lost] = []
            with self._lock:
                for ref in done:
                    node, incarnation = self._watches.pop(ref)
                    reason = _why(ray, ref)
                    if reason == AGAIN:  # unavailable for now: watched again at the next tick
                        self._again[(node, incarnation)] = time.monotonic() + self._tick_s
                    elif reason is not None:
                        gone = self.membership.lost(node, incarnation, reason)
                        if gone is not None:
                            lost.append(gone)
                lost.extend(self.membership.expired(self._now()))
                alive = {(m.info.node, m.incarnation) for m in self.membership.members()}
                for ref, who in list(self._watches.items()):
                    if who not in alive:  # lost by another signal: stop watching it
                        del self._watches[ref]
                for who in [w for w in (*self._hosts, *self._again) if w not in alive]:
                    self._hosts.pop(who, None)
                    self._again.pop(who, None)
            for gone in lost:
                self._report(gone)

    def _report(self, lost: Lost) -> None:
        log.warning(
            "node host lost", node=lost.node, incarnation=lost.incarnation, reason=lost.reason
        )
        try:
            self._on_lost(lost)
        except Exception:  # the watch must go on whatever a handler does
            log.exception("handling a lost node host failed", node=lost.node)


AGAIN = "unavailable for now"
"""What ``_why`` says of a watch whose host Ray calls unavailable for now: make it again."""


def _why(ray: Any, ref: Any) -> str | None:
    """Why a watch call ended: the death Ray reports, ``AGAIN`` when Ray says the host is only
    unavailable for now (``ActorUnavailableError``: restarting, or reconnecting), or None if
    the host answered it (it left on purpose: ``leave`` already took it out)."""
    try:
        ray.get(ref, timeout=0)
    except ray.exceptions.ActorUnavailableError:
        return AGAIN
    except ray.exceptions.RayActorError as exc:
        return f"its actor died: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
    except ray.exceptions.RayError as exc:
        return f"its watch failed: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
    return None
