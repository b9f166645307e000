"""RootWaiters: a root run's outcome lands in its waiter exactly once, and every thread
waiting on it wakes (the waiter is one lock, released once)."""

from __future__ import annotations

import threading

from subagents.messages import ChildDone, Outcome, RunStatus, SpawnReply
from subagents.runtime._root_waiters import RootWaiters


def _outcome(run_id: str, result: str) -> Outcome:
    return Outcome(run_id=run_id, status=RunStatus.COMPLETED, result=result)


def test_the_first_outcome_stays() -> None:
    roots = RootWaiters()
    waiter = roots.expect("r1")
    assert not waiter.is_set()
    assert not waiter.wait(timeout=0)
    roots.told(ChildDone(request_id="r1", outcome=_outcome("r1", "first")))
    waiter.land(_outcome("r1", "second"))  # a late duplicate: not the run's outcome
    waiter.refuse("too late")
    assert waiter.is_set() and waiter.wait(timeout=0) and waiter.wait()
    assert waiter.outcome == _outcome("r1", "first")
    assert waiter.refused is None
    assert roots.waiting() == []


def test_a_refusal_lands_once_and_no_outcome_after_it() -> None:
    roots = RootWaiters()
    waiter = roots.expect("r1")
    roots.told(SpawnReply(request_id="r1", error="no such agent"))
    waiter.land(_outcome("r1", "x"))
    assert waiter.wait(timeout=0)
    assert waiter.refused == "no such agent"
    assert waiter.outcome is None


def test_every_thread_waiting_wakes_once_it_lands() -> None:
    roots = RootWaiters()
    waiter = roots.expect("r1")
    woke: list[bool] = []
    ready = threading.Barrier(5)

    def wait() -> None:
        ready.wait(timeout=10)
        woke.append(waiter.wait(timeout=30))

    threads = [threading.Thread(target=wait) for _ in range(4)]
    for t in threads:
        t.start()
    ready.wait(timeout=10)
    roots.landed(_outcome("r1", "done"))
    for t in threads:
        t.join(timeout=30)
    assert woke == [True] * 4
    assert waiter.wait(timeout=0)


def test_landings_racing_open_it_once() -> None:
    for _ in range(200):
        waiter = RootWaiters().expect("r1")
        start = threading.Barrier(3)
        outcomes = [_outcome("r1", str(i)) for i in range(2)]

        def land(outcome: Outcome, waiter=waiter, start=start) -> None:  # type: ignore[no-untyped-def]
            start.wait(timeout=10)
            waiter.land(outcome)

        threads = [threading.Thread(target=land, args=(o,)) for o in outcomes]
        for t in threads:
            t.start()
        start.wait(timeout=10)
        waiter.refuse("closed")
        for t in threads:
            t.join(timeout=10)
        assert waiter.wait(timeout=0)
        landed = [waiter.outcome is not None, waiter.refused is not None]
        assert landed.count(True) == 1  # one of them, never two (a second release raises)
