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


# ---- the per-parent scope, resumes and parking ---------------------------------------------------


def child(agent: str, parent: str, children: int, agent_limit: int = 10) -> SlotKey:
    return SlotKey(
        agent=agent, tier=None, agent_limit=agent_limit, parent=parent, children_limit=children
    )


def test_a_parent_children_limit_queues_and_counts_per_parent() -> None:
    pool = SlotPool(global_limit=10, per_tier={}, queue_bound=10)
    assert pool.try_take("c1", child("w", "p", 2))
    assert pool.try_take("c2", child("w", "p", 2))
    assert not pool.try_take("c3", child("w", "p", 2))
    assert pool.try_take("d1", child("w", "q", 2))  # another parent's children are apart
    assert pool.by_parent["p"] == 2 and pool.by_parent["q"] == 1
    pool.enqueue("c3", child("w", "p", 2))
    pool.release("c1")
    assert pool.start_queued() == ["c3"]
    for run_id in ("c2", "c3", "d1"):
        pool.release(run_id)
    assert not pool.by_parent  # counts of parents with no child drop out (memory stays bounded)


def test_resumes_go_ahead_of_new_admissions() -> None:
    pool = SlotPool(global_limit=1, per_tier={}, queue_bound=10)
    assert pool.try_take("r0", key("a"))
    pool.enqueue("new", key("b"))
    assert not pool.want_back("parked", key("c"))  # full: it waits, ahead of "new"
    assert pool.queued() == ["parked", "new"]
    assert not pool.try_take("other", key("d"))
    pool.release("r0")
    assert pool.start_queued() == ["parked"]
    assert pool.queued() == ["new"]


def test_want_back_takes_a_free_slot_at_once() -> None:
    pool = SlotPool(global_limit=2, per_tier={}, queue_bound=10)
    assert pool.try_take("r0", key("a"))
    assert pool.want_back("parked", key("b"))
    assert pool.holds("parked") and pool.in_flight == 2


def idle_all(_run_id: str) -> bool:
    return True


def waiting(pool: SlotPool, *run_ids: str) -> None:
    """The supervisor saw these holders start waiting, in this order."""
    for run_id in run_ids:
        pool.set_idle(run_id, True)


def test_nothing_is_parked_when_nothing_is_queued_or_nobody_is_idle() -> None:
    pool = SlotPool(global_limit=1, per_tier={}, queue_bound=10)
    pool.try_take("r0", key("a"))
    waiting(pool, "r0")
    assert pool.park_candidates(idle_all) == []
    pool.enqueue("r1", key("b"))
    assert pool.park_candidates(lambda r: False) == []
    assert pool.park_candidates(idle_all) == ["r0"]
    pool.set_idle("r0", False)  # working again
    assert pool.park_candidates(idle_all) == []


def test_parking_frees_exactly_what_the_queued_runs_need_oldest_first() -> None:
    pool = SlotPool(global_limit=3, per_tier={}, queue_bound=10)
    for run_id in ("old", "mid", "new"):
        pool.try_take(run_id, key("x"))
    waiting(pool, "old", "mid", "new")
    pool.enqueue("q1", key("y"))
    pool.enqueue("q2", key("y"))
    assert pool.park_candidates(idle_all) == ["old", "mid"]
    for run_id in ("old", "mid"):
        pool.parking(run_id)
    # asked already: their slots are spoken for, nobody else is asked for the same runs
    assert pool.park_candidates(idle_all) == []
    pool.release("old")
    assert pool.start_queued() == ["q1"]


def test_a_holder_outside_the_blocking_scope_is_never_parked() -> None:
    # the queued child is blocked by its parent's children limit; the parent itself is idle
    # but counts in other scopes: parking it would not help
    pool = SlotPool(global_limit=10, per_tier={}, queue_bound=10)
    pool.try_take("parent", key("lead"))
    pool.try_take("c1", child("w", "parent", 1))
    waiting(pool, "parent", "c1")
    pool.enqueue("c2", child("w", "parent", 1))
    assert pool.park_candidates(lambda r: r == "parent") == []
    assert pool.park_candidates(idle_all) == ["c1"]


def test_one_holder_covering_every_blocking_scope_is_preferred() -> None:
    pool = SlotPool(global_limit=2, per_tier={1: 1}, queue_bound=10)
    pool.try_take("plain", key("a"))
    pool.try_take("tiered", key("b", tier=1))
    waiting(pool, "plain", "tiered")
    pool.enqueue("q", key("c", tier=1))  # blocked by the global limit and tier 1's
    assert pool.park_candidates(idle_all) == ["tiered"]


def test_a_queued_run_that_cannot_be_helped_does_not_hold_up_the_next() -> None:
    pool = SlotPool(global_limit=2, per_tier={}, queue_bound=10)
    pool.try_take("busy", key("a", agent_limit=1))  # working: not idle
    pool.try_take("idle", key("b"))
    waiting(pool, "idle")
    pool.enqueue("qa", key("a", agent_limit=1))  # blocked by agent a: only "busy" is there
    pool.enqueue("qc", key("c"))
    assert pool.park_candidates(lambda r: r == "idle") == ["idle"]
    pool.parking("idle")
    pool.release("idle")
    assert pool.start_queued() == ["qc"]
    assert pool.queued() == ["qa"]


def test_what_parking_tracks_is_forgotten_when_nobody_waits() -> None:
    pool = SlotPool(global_limit=1, per_tier={}, queue_bound=10)
    for i in range(50):  # many parents come and go, runs queue behind each other
        pool.try_take(f"a{i}", child("w", f"p{i}", 1))
        pool.enqueue(f"b{i}", child("w", f"p{i}", 1))
        pool.release(f"a{i}")
        assert pool.start_queued() == [f"b{i}"]
        pool.release(f"b{i}")
    assert pool._touched == {} and pool._stuck == set() and not pool._demand
    assert not pool.by_parent and not pool._idle_in
