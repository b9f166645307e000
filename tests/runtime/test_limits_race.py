"""Every concurrency limit holds when many threads spawn at once; every run ends exactly once."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from gates import Gate, Tally
from subagents.behaviour.function import AgentContext, FunctionAgent
from subagents.messages import EventKind, RunStatus
from subagents.runtime import AdmissionError, RunHandle, Runtime
from subagents.store.base import RunStore
from subagents.supervision.limits import Limits

from .conftest import WAIT, Events, SlotTally

pytestmark = pytest.mark.usefixtures("no_new_threads")

TIERS = {"t1a": 1, "t1b": 1, "t2": 2, "free": None}
BATCH_WAIT = 120.0
"""The hang guard for 200 runs through a durable store from 8 threads: not milliseconds on a
loaded machine (a passing wait returns as soon as the work is done)."""


def make_agents(hold: Callable[[AgentContext], Any]) -> list[FunctionAgent]:
    return [FunctionAgent.create(name, hold, tier=tier) for name, tier in TIERS.items()]


def test_limits_hold_under_racing_spawns_from_many_threads(store: RunStore) -> None:
    tally = Tally()  # counts the runs working at once, wherever they run

    def working(ctx: AgentContext) -> None:
        """A stretch of work between two awaits: counted while it runs."""
        with tally.counting(ctx.agent, "global"):
            sum(range(2000))  # long enough for other agents' threads to run meanwhile

    async def work(ctx: AgentContext) -> str:
        working(ctx)
        await ctx.receive(timeout=0.05)  # a wait long enough to park (on a cluster too)
        working(ctx)
        return ctx.task

    limits = Limits(max_concurrency=4, per_agent=2, per_tier={1: 3, 2: 1}, queue_bound=200)
    in_flight = SlotTally(TIERS)
    events = Events()
    handles: list[RunHandle] = []
    handles_lock = threading.Lock()
    errors: list[BaseException] = []
    names = list(TIERS)
    start = threading.Barrier(8, timeout=WAIT)

    with Runtime(make_agents(work), limits=limits, store=store) as rt:
        rt.subscribe(in_flight)
        rt.subscribe(events)

        def spawner(n: int) -> None:
            try:
                start.wait()
                for i in range(25):
                    handle = rt.spawn(names[(n + i) % len(names)], f"{n}-{i}")
                    with handles_lock:
                        handles.append(handle)
            except BaseException as exc:  # surfaced below
                errors.append(exc)

        threads = [threading.Thread(target=spawner, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(BATCH_WAIT)
        assert errors == []
        assert len(handles) == 200
        outcomes = [h.result(BATCH_WAIT) for h in handles]
        assert all(o.status is RunStatus.COMPLETED for o in outcomes)
        assert sorted(o.result or "" for o in outcomes) == sorted(
            f"{n}-{i}" for n in range(8) for i in range(25)
        )
        assert rt.stats().peak <= 4
        assert rt.stats().in_flight == 0

    assert in_flight.peak["global"] <= 4
    for name in TIERS:
        assert in_flight.peak[f"agent:{name}"] <= 2, in_flight.peak
    assert in_flight.peak["tier:1"] <= 3
    assert in_flight.peak["tier:2"] <= 1
    peak = tally.peak()
    assert peak["global"] <= 4 and all(peak[n] <= 2 for n in TIERS)
    # the limits were reached, so the test could have seen them broken
    assert in_flight.peak["global"] == 4
    assert len(events.of(EventKind.QUEUED)) > 0
    assert in_flight.parked > 0  # waiting runs lent their slots: working runs stayed in bounds
    # every run ended exactly once
    counts = events.terminal_counts()
    assert len(counts) == 200
    assert set(counts.values()) == {1}
    assert len(in_flight.started) == 200
    assert len(store.list_runs(statuses=[RunStatus.COMPLETED])) == 200


def test_the_queue_bound_refuses_past_it_and_the_queue_is_fifo() -> None:
    release = Gate()

    def hold(ctx: AgentContext) -> str:
        assert release.wait(WAIT)
        return ctx.task

    events = Events()
    with Runtime(
        [FunctionAgent.create("hold", hold)], limits=Limits(max_concurrency=1, queue_bound=2)
    ) as rt:
        rt.subscribe(events)
        first = rt.spawn("hold", "1")
        second = rt.spawn("hold", "2")
        third = rt.spawn("hold", "3")
        assert second.status is RunStatus.QUEUED and third.status is RunStatus.QUEUED
        fourth = rt.spawn("hold", "4")  # told: the refusal reaches its handle
        with pytest.raises(
            AdmissionError, match=r"queue bound: the admission queue is full \(2 runs"
        ):
            fourth.result(WAIT)
        release.set()
        for handle in (first, second, third):
            assert handle.result(WAIT).status is RunStatus.COMPLETED
        started = [e.run_id for e in events.of(EventKind.STARTED)]
        assert started == [first.run_id, second.run_id, third.run_id]
        queued = events.of(EventKind.QUEUED)
        assert [(e.run_id, e.data["position"]) for e in queued] == [
            (second.run_id, 1),
            (third.run_id, 2),
        ]


def test_the_queue_bound_holds_under_racing_spawns() -> None:
    release = Gate()

    def hold(ctx: AgentContext) -> str:
        assert release.wait(WAIT)
        return "ok"

    admitted: list[RunHandle] = []
    refused: list[str] = []
    lock = threading.Lock()
    start = threading.Barrier(8, timeout=WAIT)
    limits = Limits(max_concurrency=2, queue_bound=5)
    with Runtime([FunctionAgent.create("hold", hold)], limits=limits) as rt:

        def spawner() -> None:
            start.wait()
            for _ in range(10):
                try:
                    handle = rt.spawn("hold", "x")
                    handle.wait_admitted()  # refused by the queue: on the handle
                except AdmissionError as exc:
                    with lock:
                        refused.append(str(exc))
                else:
                    with lock:
                        admitted.append(handle)

        threads = [threading.Thread(target=spawner) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(WAIT)
        assert len(admitted) == 7  # 2 running + 5 queued
        assert len(refused) == 73
        assert set(refused) == {
            "queue bound: the admission queue is full (5 runs waiting); raise"
            " Limits(queue_bound=...) (--queue-bound on the command line)"
        }
        release.set()
        assert all(h.result(WAIT).status is RunStatus.COMPLETED for h in admitted)
