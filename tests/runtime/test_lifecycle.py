"""Closing the runtime: every run ends, every thread it started is gone; events seen."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from subagents.behaviour.function import AgentContext, FunctionAgent
from subagents.behaviour.tools import SPAWN
from subagents.messages import EventKind, RunStatus
from subagents.models.scripted import ScriptedModel
from subagents.runtime import AgentLike, Runtime, RuntimeClosed
from subagents.supervision.limits import Limits

from .conftest import TERMINAL, WAIT, Events, spec


def test_no_thread_is_left_after_closing_with_runs_in_flight() -> None:
    before = set(threading.enumerate())

    async def waiter(ctx: AgentContext) -> str:
        await ctx.receive(timeout=WAIT * 6)
        return "never"

    model = ScriptedModel(
        {
            "boss": [{"tool_calls": [{"name": SPAWN, "input": {"agent": "sleeper", "task": "z"}}]}],
            "sleeper": [{"text": "never", "delay": 60}],
        }
    )
    agents: list[AgentLike] = [
        spec("boss"),
        spec("sleeper"),
        FunctionAgent.create("waiter", waiter),
    ]
    events = Events()
    # per_agent=2: the queued sleeper waits for the two working ones (boss and waiter, which
    # wait, would lend their slots to a queued run of another agent)
    rt = Runtime(agents, model=model, limits=Limits(max_concurrency=4, per_agent=2))
    rt.subscribe(events)
    boss = rt.spawn("boss", "b")  # its child is blocked in a 60 s model call
    events.wait_count(EventKind.STARTED, "sleeper", 1)
    sleeper = rt.spawn("sleeper", "s")  # blocked in a 60 s model call itself
    waiter_run = rt.spawn("waiter", "w")  # suspended on its mailbox
    queued = rt.spawn("sleeper", "q")  # over the per-agent limit
    events.wait_count(EventKind.STARTED, "sleeper", 2)
    events.wait_count(EventKind.WAITING, "waiter", 1)
    assert queued.status is RunStatus.QUEUED
    rt.close()  # within its 10 s: the 60 s model calls are cut short, or their threads stay
    left = [t for t in threading.enumerate() if t not in before and t.is_alive()]
    assert left == [], [t.name for t in left]
    for handle in (boss, sleeper, waiter_run, queued):
        outcome = handle.result(0)
        assert outcome.status is RunStatus.CANCELLED
        assert outcome.error == "runtime closed"
    counts = events.terminal_counts()
    assert len(counts) == 5 and set(counts.values()) == {1}
    assert not events.of(EventKind.STARTED, "sleeper")[2:]  # the queued run never started
    with pytest.raises(RuntimeClosed):
        rt.spawn("boss", "again")
    rt.close()  # closing twice is harmless


def test_no_thread_is_left_after_a_quiet_runtime() -> None:
    before = set(threading.enumerate())
    with Runtime([spec("a")], model=ScriptedModel({})) as rt:
        assert rt.run("a", "x", wait=WAIT).status is RunStatus.COMPLETED
    left = [t for t in threading.enumerate() if t not in before and t.is_alive()]
    assert left == [], [t.name for t in left]


def test_every_event_kind_is_observed() -> None:
    release = threading.Event()

    def hold(ctx: AgentContext) -> str:
        assert release.wait(WAIT)
        return "held"

    def crash(ctx: AgentContext) -> str:
        raise RuntimeError("crash")

    def call(name: str, **arguments: Any) -> dict[str, Any]:
        return {"name": name, "input": arguments}

    model = ScriptedModel(
        {
            "lead": [
                {
                    "tool_calls": [
                        call(SPAWN, agent="pinger", task="ping"),
                        call(SPAWN, agent="ponger", task="pong"),
                        call(SPAWN, agent="slow", task="slow", timeout=0.1),
                        call(SPAWN, agent="crash", task="crash"),
                    ]
                },
                "done",
            ],
            "pinger": [{"tool_calls": [call("send_message", to="ponger", content="ping")]}, "ok"],
            "ponger": [{"tool_calls": [call("wait_for_message", timeout=WAIT)]}, "ok"],
            "slow": [{"text": "never", "delay": 30}],
        }
    )
    agents: list[AgentLike] = [
        spec("lead"),
        spec("pinger"),
        spec("ponger"),
        spec("slow"),
        FunctionAgent.create("crash", crash),
        FunctionAgent.create("hold", hold),
    ]
    events = Events()
    with Runtime(agents, model=model, limits=Limits(max_concurrency=6)) as rt:
        rt.subscribe(events)
        outcome = rt.run("lead", "job", wait=WAIT)
        assert outcome.status is RunStatus.COMPLETED
        held = [rt.spawn("hold", str(i)) for i in range(6)]
        events.wait_count(EventKind.QUEUED, "hold", 1)
        held[0].stop()
        release.set()
        assert held[0].result(WAIT).status is RunStatus.CANCELLED
        assert all(h.result(WAIT).status is RunStatus.COMPLETED for h in held[1:])
        tree = rt.tree(outcome.run_id)
        assert {c.agent: c.status for c in tree.children} == {
            "pinger": RunStatus.COMPLETED,
            "ponger": RunStatus.COMPLETED,
            "slow": RunStatus.TIMED_OUT,
            "crash": RunStatus.FAILED,
        }
    wanted = {
        EventKind.SPAWNED,
        EventKind.QUEUED,
        EventKind.STARTED,
        EventKind.STEP,
        EventKind.TOOL_CALL,
        EventKind.MAIL_SENT,
        EventKind.MAIL_DELIVERED,
        EventKind.WAITING,
        EventKind.COMPLETED,
        EventKind.FAILED,
        EventKind.CANCELLED,
        EventKind.TIMED_OUT,
    }
    assert wanted <= events.kinds(), wanted - events.kinds()
    for event in events.of(EventKind.MAIL_SENT):  # one mail a step: the per-mail shape
        assert set(event.data) == {"mail_id", "recipient"}, event.data
    for event in events.snapshot():  # every event names its run, agent and place in the tree
        assert event.run_id and event.agent and event.root_run_id
        if event.kind in TERMINAL:
            assert set(event.data) >= {"error_kind", "error"}
