"""SlotPool: global / per-agent / per-tier counting, FIFO first-that-fits, queue bound, peak."""

from __future__ import annotations

import pytest

from subagents.supervision.slots import QueueFull, SlotKey, SlotPool


def key(agent: str, tier: int | None = None, agent_limit: int = 10) -> SlotKey:
    return SlotKey(agent=agent, tier=tier, agent_limit=agent_limit)


def test_global_limit_then_queue_in_fifo_order() -> None:
    pool = SlotPool(global_limit=2, per_tier={}, queue_bound=10)
    assert pool.try_take("r1", key("a"))
    assert pool.try_take("r2", key("b"))
    assert not pool.try_take("r3", key("c"))
    assert pool.enqueue("r3", key("c")) == 1
    assert pool.enqueue("r4", key("d")) == 2
    assert pool.in_flight == 2
    assert pool.release("r1")
    assert pool.start_queued() == ["r3"]
    assert pool.queued() == ["r4"]
    assert pool.holds("r3") and not pool.holds("r1")
    assert pool.peak == 2


def test_per_agent_limit() -> None:
    pool = SlotPool(global_limit=10, per_tier={}, queue_bound=10)
    assert pool.try_take("a1", key("a", agent_limit=2))
    assert pool.try_take("a2", key("a", agent_limit=2))
    assert not pool.try_take("a3", key("a", agent_limit=2))
    assert pool.try_take("b1", key("b", agent_limit=2))
    assert pool.by_agent["a"] == 2


def test_per_tier_limit_and_untiered_runs_are_not_counted() -> None:
    pool = SlotPool(global_limit=10, per_tier={1: 1}, queue_bound=10)
    assert pool.try_take("t1", key("a", tier=1))
    assert not pool.try_take("t2", key("b", tier=1))
    assert pool.try_take("t3", key("c", tier=2))  # no limit for tier 2
    assert pool.try_take("n1", key("d"))
    assert pool.by_tier[1] == 1
    pool.release("t1")
    assert pool.try_take("t2", key("b", tier=1))


def test_first_that_fits_skips_a_run_blocked_only_by_its_own_agent() -> None:
    pool = SlotPool(global_limit=2, per_tier={}, queue_bound=10)
    assert pool.try_take("a1", key("a", agent_limit=1))
    assert pool.try_take("b1", key("b"))
    pool.enqueue("a2", key("a", agent_limit=1))  # blocked by agent a's limit once b1 ends
    pool.enqueue("c1", key("c"))
    pool.enqueue("c2", key("c"))
    pool.release("b1")
    assert pool.start_queued() == ["c1"]  # a2 still blocked by a1; c1 behind it goes first
    assert pool.queued() == ["a2", "c2"]
    pool.release("a1")
    assert pool.start_queued() == ["a2"]  # FIFO: a2 before c2
    assert pool.queued() == ["c2"]


def test_start_queued_never_exceeds_the_global_limit() -> None:
    pool = SlotPool(global_limit=3, per_tier={}, queue_bound=100)
    for i in range(3):
        assert pool.try_take(f"r{i}", key(f"x{i}"))
    for i in range(3, 10):
        pool.enqueue(f"r{i}", key(f"x{i}"))
    pool.release("r0")
    pool.release("r1")
    assert pool.start_queued() == ["r3", "r4"]
    assert pool.in_flight == 3
    assert pool.peak == 3


def test_queue_bound_refuses_with_a_clear_error() -> None:
    pool = SlotPool(global_limit=1, per_tier={}, queue_bound=2)
    pool.try_take("r0", key("a"))
    pool.enqueue("r1", key("a"))
    pool.enqueue("r2", key("a"))
    with pytest.raises(QueueFull, match=r"queue is full \(2 runs waiting\)"):
        pool.enqueue("r3", key("a"))


def test_release_of_a_queued_run_drops_it_and_of_an_unknown_run_is_false() -> None:
    pool = SlotPool(global_limit=1, per_tier={}, queue_bound=5)
    pool.try_take("r0", key("a"))
    pool.enqueue("r1", key("b"))
    assert not pool.release("r1")
    assert pool.queued() == []
    assert not pool.release("nobody")
    assert pool.in_flight == 1


def test_a_new_run_does_not_overtake_an_earlier_queued_run_of_the_same_kind() -> None:
    # try_take's contract: it takes a slot only if nobody earlier is queued for the same.
    pool = SlotPool(global_limit=1, per_tier={}, queue_bound=5)
    assert pool.try_take("r0", key("a"))
    pool.enqueue("r1", key("a"))
    pool.release("r0")  # the slot is free, r1 still queued (start_queued not called yet)
    assert not pool.try_take("r2", key("a"))
    assert pool.start_queued() == ["r1"]
