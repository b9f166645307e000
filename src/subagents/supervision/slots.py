"""Concurrency slots and the admission queue.

A run holds a slot from the moment it starts until it ends (running or waiting). Runs that do
not fit wait in a FIFO queue; when a slot frees, the queue is scanned in order and the first
run that fits every limit starts (a run blocked only by its own agent's limit does not hold up
runs of other agents behind it).

Whether a run fits depends only on its ``SlotKey``, and most queued runs share a few keys (a
fan-out queues hundreds of runs of one agent). So the pool counts queued runs per key and
checks each distinct key once: a release next to 900 queued runs of one agent costs one check,
not 900.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from dataclasses import dataclass


@dataclass(frozen=True)
class SlotKey:
    """What a run counts against: its agent and its tier (None = no tier)."""

    agent: str
    tier: int | None
    agent_limit: int


class QueueFull(Exception):
    """The admission queue is at its bound."""


class SlotPool:
    """Counts live runs globally, per agent and per tier; queues runs that do not fit."""

    def __init__(self, *, global_limit: int, per_tier: dict[int, int], queue_bound: int) -> None:
        self.global_limit = global_limit
        self.per_tier = dict(per_tier)
        self.queue_bound = queue_bound
        self.in_flight = 0
        self.by_agent: Counter[str] = Counter()
        self.by_tier: Counter[int] = Counter()
        self.peak = 0
        self._holders: dict[str, SlotKey] = {}
        self._queue: OrderedDict[str, SlotKey] = OrderedDict()
        self._queued_keys: Counter[SlotKey] = Counter()
        """How many queued runs have each key (only keys with at least one)."""

    def fits(self, key: SlotKey) -> bool:
        if self.in_flight >= self.global_limit:
            return False
        if self.by_agent[key.agent] >= key.agent_limit:
            return False
        tier_limit = self.per_tier.get(key.tier) if key.tier is not None else None
        return not (tier_limit is not None and self.by_tier[key.tier or 0] >= tier_limit)

    def try_take(self, run_id: str, key: SlotKey) -> bool:
        """Take a slot for ``run_id`` if it fits and nobody earlier is queued for the same."""
        if not self.fits(key):
            return False
        if any(self.fits(queued) for queued in self._queued_keys):
            return False  # a queued run could take this slot: it goes first (FIFO)
        self._take(run_id, key)
        return True

    def force_take(self, run_id: str, key: SlotKey) -> None:
        """Take a slot regardless of the limits: a run that was running before a restart."""
        self._take(run_id, key)

    def _take(self, run_id: str, key: SlotKey) -> None:
        self._holders[run_id] = key
        self.in_flight += 1
        self.by_agent[key.agent] += 1
        if key.tier is not None:
            self.by_tier[key.tier] += 1
        self.peak = max(self.peak, self.in_flight)

    def enqueue(self, run_id: str, key: SlotKey) -> int:
        """Queue ``run_id``; its 1-based position. Raises QueueFull past the bound."""
        if len(self._queue) >= self.queue_bound:
            raise QueueFull(f"the admission queue is full ({self.queue_bound} runs waiting)")
        self._queue[run_id] = key
        self._queued_keys[key] += 1
        return len(self._queue)

    def _unqueue(self, run_id: str) -> None:
        key = self._queue.pop(run_id, None)
        if key is not None:
            self._queued_keys[key] -= 1
            if self._queued_keys[key] <= 0:
                del self._queued_keys[key]

    def release(self, run_id: str) -> bool:
        """Free the slot of ``run_id`` (or drop it from the queue). True if it held one."""
        self._unqueue(run_id)
        key = self._holders.pop(run_id, None)
        if key is None:
            return False
        self.in_flight -= 1
        self.by_agent[key.agent] -= 1
        if key.tier is not None:
            self.by_tier[key.tier] -= 1
        return True

    def start_queued(self) -> list[str]:
        """Take slots for queued runs that now fit, in FIFO order; the run ids to start."""
        started: list[str] = []
        # Slots are only taken during the scan, so a key that did not fit stays blocked until
        # the scan ends: once every queued key is blocked, nothing behind can start.
        blocked: set[SlotKey] = set()
        for run_id, key in self._queue.items():
            if self.in_flight >= self.global_limit or len(blocked) == len(self._queued_keys):
                break
            if key in blocked:
                continue
            if self.fits(key):
                self._take(run_id, key)
                started.append(run_id)
            else:
                blocked.add(key)
        for run_id in started:
            self._unqueue(run_id)
        return started

    def start_over_limit(self, run_id: str) -> None:
        """Take a slot for queued ``run_id`` whatever the limits."""
        key = self._queue[run_id]
        self._take(run_id, key)
        self._unqueue(run_id)

    def holders(self) -> list[str]:
        """The runs holding a slot."""
        return list(self._holders)

    def holds(self, run_id: str) -> bool:
        return run_id in self._holders

    def queued(self) -> list[str]:
        return list(self._queue)

    def queue_length(self) -> int:
        """How many runs wait for a slot."""
        return len(self._queue)
