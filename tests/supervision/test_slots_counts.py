"""SlotPool's kept counts against a recount, after every operation of random sequences.

The pool never recounts: the slots held per scope (``in_flight``, ``by_agent``, ``by_tier``,
``by_parent``) and the idle holders per scope not asked to park (``_idle_in``) are kept,
updated where a slot is taken or given back and where a holder starts or stops waiting.
Parking decisions read them, so a count that drifts parks the wrong run or none (a queued
run then waits for ever). Here each kept count is compared with one worked out from the
holders themselves after every step; and the one-scope cover (``_cover``'s pass) with the
greedy one it replaces for that case.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest

from subagents.supervision.slots import GLOBAL, QueueFull, Scope, SlotKey, SlotPool

AGENTS = ("a", "b", "c")
PARENTS = (None, "p1", "p2")


def _random_key(rng: random.Random) -> SlotKey:
    parent = rng.choice(PARENTS)
    return SlotKey(
        agent=rng.choice(AGENTS),
        tier=rng.choice((None, 1, 2)),
        agent_limit=rng.randint(1, 4),
        parent=parent,
        children_limit=rng.randint(1, 3) if parent is not None else 0,
    )


def _recount(pool: SlotPool) -> dict[str, Counter[Scope]]:
    held: Counter[Scope] = Counter()
    idle: Counter[Scope] = Counter()
    for run_id, key in pool._holders.items():
        for scope, _ in pool.scopes(key):
            held[scope] += 1
            if run_id in pool._idle and run_id not in pool._releasing:
                idle[scope] += 1
    return {"held": held, "idle": idle}


def _kept(pool: SlotPool) -> dict[str, Counter[Scope]]:
    held: Counter[Scope] = Counter({GLOBAL: pool.in_flight})
    for kind, counts in (("agent", pool.by_agent), ("tier", pool.by_tier)):
        held.update({(kind, name): n for name, n in counts.items()})
    held.update({("parent", name): n for name, n in pool.by_parent.items()})
    # a tier without a limit is counted in by_tier but is no scope of any key: not compared
    held = Counter(
        {s: n for s, n in held.items() if n and (s[0] != "tier" or s[1] in pool.per_tier)}
    )
    return {"held": held, "idle": Counter({s: n for s, n in pool._idle_in.items() if n})}


def _step(pool: SlotPool, rng: random.Random, keys: dict[str, SlotKey], names: list[str]) -> None:
    op = rng.randrange(9)
    known = list(keys)
    if op <= 1 or not known:  # a new run: started, or queued
        run_id = f"r{len(names)}"
        names.append(run_id)
        key = keys[run_id] = _random_key(rng)
        if not pool.try_take(run_id, key):
            try:
                pool.enqueue(run_id, key)
            except QueueFull:
                del keys[run_id]
        return
    run_id = rng.choice(known)
    if op == 2:  # it ends
        pool.release(run_id)
        del keys[run_id]
    elif op == 3:
        pool.set_idle(run_id, rng.random() < 0.7)
    elif op == 4:
        for asked in pool.park_candidates(lambda r: rng.random() < 0.9):
            pool.parking(asked)
    elif op == 5 and pool.is_parking(run_id):  # it parked: its slot given back
        pool.release(run_id)
        if rng.random() < 0.5:
            pool.want_back(run_id, keys[run_id])
    elif op == 6:
        pool.not_parking(run_id)
    elif op == 7:
        pool.start_queued()
    elif op == 8 and not pool.holds(run_id) and run_id not in pool.queued():
        pool.want_back(run_id, keys[run_id])


@pytest.mark.parametrize("seed", range(40))
def test_kept_counts_equal_a_recount_after_every_operation(seed: int) -> None:
    rng = random.Random(seed)
    pool = SlotPool(global_limit=rng.randint(2, 8), per_tier={1: 2}, queue_bound=30)
    keys: dict[str, SlotKey] = {}
    names: list[str] = []
    for step in range(400):
        _step(pool, rng, keys, names)
        assert _kept(pool) == _recount(pool), f"seed {seed}, step {step}"
        assert pool.queue_length() == len(pool.queued())
        assert sum(pool.queued_keys.values()) + sum(pool._resume_keys.values()) == len(
            pool.queued()
        )
        if rng.random() < 0.01:
            pool.release_all()
            keys.clear()
            assert _kept(pool) == _recount(pool) == {"held": Counter(), "idle": Counter()}


@pytest.mark.parametrize("seed", range(40))
def test_the_one_scope_cover_is_the_greedy_cover(seed: int) -> None:
    rng = random.Random(seed)
    pool = SlotPool(global_limit=100, per_tier={1: 50, 2: 50}, queue_bound=10)
    holders = [f"h{i}" for i in range(rng.randint(0, 12))]
    for run_id in holders:
        pool.force_take(run_id, _random_key(rng))
    scopes = sorted({s for h in holders for s, _ in pool.scopes(pool._holders[h])}, key=repr)
    for _ in range(30):
        candidates = [h for h in holders if rng.random() < 0.7]
        rng.shuffle(candidates)  # any order: the cover keeps it (the oldest first)
        scope = rng.choice([*scopes, ("agent", "nobody")])
        needs = {scope: rng.randint(1, 4)}
        assert pool._cover(needs, candidates) == pool._cover_greedy(needs, candidates)
