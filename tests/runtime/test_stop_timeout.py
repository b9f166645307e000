"""Timeouts and stops: every descendant gets exactly one final status, reported once.

Long model calls are the offline model's ``delay``, which a stop or a deadline cuts short, so
nothing here sleeps. A timeout that must find a run's child already spawned is seconds, not a
fraction of one: at load ~8 a parent's first step and spawn once took over 0.2 s, and the test
that gave its root 0.2 s found no child to cancel.
"""

from __future__ import annotations

from typing import Any

import pytest

from shown import ShownModel
from subagents.behaviour.function import AgentContext, FunctionAgent, SpawnRefused
from subagents.behaviour.tools import SPAWN
from subagents.messages import EventKind, RunRecord, RunStatus
from subagents.models.scripted import ScriptedModel
from subagents.runtime import AgentLike, Runtime
from subagents.store.base import RunStore
from subagents.supervision.limits import Limits

from .conftest import WAIT, Events, requests_of, spec, tool_results

pytestmark = pytest.mark.usefixtures("no_new_threads")


def spawn_call(agent: str, task: str, **extra: Any) -> dict[str, Any]:
    return {"name": SPAWN, "input": {"agent": agent, "task": task, **extra}}


def by_agent(runs: list[RunRecord]) -> dict[str, RunRecord]:
    out = {r.agent: r for r in runs}
    assert len(out) == len(runs), "one run per agent expected"
    return out


def test_a_timeout_ends_the_subtree_once_and_the_others_finish(store: RunStore) -> None:
    model = ShownModel(
        {
            "lead": [
                {
                    "tool_calls": [
                        spawn_call("slow", "waits on a long leaf", timeout=2.5),
                        spawn_call("sleepy", "one long model call", timeout=2),
                        spawn_call("fast", "quick one"),
                    ]
                },
                {"text": "{results_status}"},
            ],
            "slow": [{"tool_calls": [spawn_call("leaf", "long")]}, "slow done"],
            "leaf": [{"text": "never", "delay": 30}],
            "sleepy": [{"text": "never", "delay": 30}],
            "fast": ["fast done"],
        }
    )
    events = Events()
    agents = [spec(n) for n in ("lead", "slow", "leaf", "sleepy", "fast")]
    with Runtime(agents, model=model, store=store) as rt:
        rt.subscribe(events)
        outcome = rt.run("lead", "job", wait=WAIT)
        assert outcome.status is RunStatus.COMPLETED
        assert outcome.result == "timed_out\ntimed_out\ncompleted"
        results = tool_results(requests_of(model, "lead")[1].messages[-1])
        assert [r.is_error for r in results] == [True, True, False]
        runs = by_agent(rt.runs(root_run_id=outcome.run_id))
        assert runs["slow"].status is RunStatus.TIMED_OUT
        assert runs["sleepy"].status is RunStatus.TIMED_OUT
        assert runs["leaf"].status is RunStatus.CANCELLED
        assert runs["fast"].status is RunStatus.COMPLETED
        assert runs["lead"].status is RunStatus.COMPLETED
        for record in runs.values():
            assert record.outcome is not None and record.outcome.status is record.status
            assert record.ended_at is not None
        slow_outcome = runs["slow"].outcome
        assert slow_outcome is not None and slow_outcome.error_kind == "timeout"
        assert slow_outcome.error == "slow ran past its 2.5 s timeout"
        leaf_outcome = runs["leaf"].outcome
        assert leaf_outcome is not None and "its ancestor slow timed out" in (
            leaf_outcome.error or ""
        )
        counts = events.terminal_counts()
        assert {r.run_id: counts[r.run_id] for r in runs.values()} == {
            r.run_id: 1 for r in runs.values()
        }
        assert len(events.of(EventKind.TIMED_OUT)) == 2
        tree = rt.tree(outcome.run_id)
        assert {c.agent: c.status for c in tree.children} == {
            "slow": RunStatus.TIMED_OUT,
            "sleepy": RunStatus.TIMED_OUT,
            "fast": RunStatus.COMPLETED,
        }


def test_a_stop_cancels_the_whole_subtree_deepest_first_each_once(store: RunStore) -> None:
    model = ScriptedModel(
        {
            "boss": [{"tool_calls": [spawn_call("mid", "m")]}, "boss done"],
            "mid": [{"tool_calls": [spawn_call("leaf", "a"), spawn_call("leaf", "b")]}, "mid"],
            "leaf": [{"text": "never", "delay": 30}],
        }
    )
    events = Events()
    with Runtime([spec("boss"), spec("mid"), spec("leaf")], model=model, store=store) as rt:
        rt.subscribe(events)
        handle = rt.spawn("boss", "job")
        events.wait_count(EventKind.STARTED, "leaf", 2)
        stopped = handle.stop()
        outcome = handle.result(WAIT)
        assert outcome.status is RunStatus.CANCELLED
        runs = rt.runs(root_run_id=handle.run_id)
        assert len(runs) == 4
        assert set(stopped) == {r.run_id for r in runs}
        depth = {r.run_id: r.depth for r in runs}
        assert [depth[r] for r in stopped] == sorted((depth[r] for r in stopped), reverse=True)
        assert all(r.status is RunStatus.CANCELLED for r in runs)
        counts = events.terminal_counts()
        assert all(counts[r.run_id] == 1 for r in runs)
        assert [e.run_id for e in events.of(EventKind.CANCELLED)] == list(stopped)
        with pytest.raises(LookupError, match="already ended"):
            handle.stop()
        assert handle.status is RunStatus.CANCELLED
    # after close, nothing else reported a second final status
    assert all(events.terminal_counts()[r.run_id] == 1 for r in runs)


def test_an_agent_stops_its_own_background_child_with_stop_subagent() -> None:
    model = ScriptedModel(
        {
            "boss": [
                {"tool_calls": [spawn_call("leaf", "bg", background=True)]},
                {
                    "tool_calls": [
                        {"name": "stop_subagent", "input": {"run_id": "{result0_run_id}"}}
                    ]
                },
                {"text": "{result0}"},
            ],
            "leaf": [{"text": "never", "delay": 30}],
        }
    )
    with Runtime([spec("boss"), spec("leaf")], model=model) as rt:
        outcome = rt.run("boss", "job", wait=WAIT)
        assert outcome.status is RunStatus.COMPLETED
        # this tree's (a cluster's default store is shared by every runtime on it)
        (leaf,) = rt.runs(agent="leaf", root_run_id=outcome.run_id)
        assert leaf.status is RunStatus.CANCELLED
        assert outcome.result == f'{{"stopped":["{leaf.run_id}"]}}'


def test_deadlines_racing_completions_still_end_each_run_once(store: RunStore) -> None:
    async def nap(ctx: AgentContext) -> str:
        # wakes about when the deadline fires (a wake of the whole timeout or more is not
        # armed: it could not go off first, AgentActor.wake_after)
        await ctx.receive(timeout=0.049)
        return "woke"

    events = Events()
    limits = Limits(max_concurrency=60, per_agent=60)
    with Runtime([FunctionAgent.create("nap", nap)], limits=limits, store=store) as rt:
        rt.subscribe(events)
        handles = [rt.spawn("nap", str(i), timeout=0.05) for i in range(60)]
        outcomes = [h.result(WAIT) for h in handles]
        assert {o.status for o in outcomes} <= {RunStatus.COMPLETED, RunStatus.TIMED_OUT}
        for handle, outcome in zip(handles, outcomes, strict=True):
            record = rt.get(handle.run_id)
            assert record is not None and record.status is outcome.status
        counts = events.terminal_counts()
        assert len(counts) == 60 and set(counts.values()) == {1}


def test_a_stop_racing_a_fan_out_in_progress_ends_every_run_once(store: RunStore) -> None:
    async def leaf(ctx: AgentContext) -> str:
        await ctx.receive(timeout=WAIT)
        return "leaf"

    async def branch(ctx: AgentContext) -> str:
        await ctx.gather(ctx.spawn("leaf", "a"), ctx.spawn("leaf", "b"))
        return "branch"

    async def root(ctx: AgentContext) -> str:
        pending = []
        try:
            for i in range(5):
                pending.append(ctx.spawn("branch", str(i)))
                await ctx.receive(timeout=0.001)  # spawns keep coming while the stop lands
        except SpawnRefused:
            pass
        await ctx.gather(*pending)
        return "root"

    agents: list[AgentLike] = [
        FunctionAgent.create(n, f) for n, f in (("root", root), ("branch", branch), ("leaf", leaf))
    ]
    events = Events()
    with Runtime(agents, store=store) as rt:
        rt.subscribe(events)
        handle = rt.spawn("root", "go")
        events.wait_count(EventKind.STARTED, "leaf", 2)
        handle.stop()
        assert handle.result(WAIT).status is RunStatus.CANCELLED
        runs = rt.runs(root_run_id=handle.run_id)
        assert len(runs) >= 4
        assert all(r.status is RunStatus.CANCELLED for r in runs), [
            (r.agent, r.status) for r in runs
        ]
        counts = events.terminal_counts()
        assert all(counts[r.run_id] == 1 for r in runs)
    assert all(events.terminal_counts()[r.run_id] == 1 for r in runs)


def test_stopping_one_child_from_outside_lets_its_parent_and_siblings_finish() -> None:
    model = ShownModel(
        {
            "lead": [
                {"tool_calls": [spawn_call("leaf", "long"), spawn_call("quick", "short")]},
                {"text": "{results_status}"},
            ],
            "leaf": [{"text": "never", "delay": 30}],
            "quick": ["quick done"],
        }
    )
    events = Events()
    with Runtime([spec("lead"), spec("leaf"), spec("quick")], model=model) as rt:
        rt.subscribe(events)
        handle = rt.spawn("lead", "job")
        events.wait_count(EventKind.STARTED, "leaf", 1)
        (leaf,) = rt.runs(agent="leaf", root_run_id=handle.run_id)  # a cluster's store is shared
        assert rt.stop(leaf.run_id) == (leaf.run_id,)
        outcome = handle.result(WAIT)
        assert outcome.status is RunStatus.COMPLETED
        assert outcome.result == "cancelled\ncompleted"
        (stopped_result, _) = tool_results(requests_of(model, "lead")[1].messages[-1])
        assert stopped_result.is_error
        assert events.terminal_counts()[leaf.run_id] == 1


def test_a_root_timeout_reaches_the_caller_and_cancels_its_children(store: RunStore) -> None:
    model = ScriptedModel(
        {
            "boss": [{"tool_calls": [spawn_call("leaf", "long")]}, "never"],
            "leaf": [{"text": "never", "delay": 30}],
        }
    )
    events = Events()
    with Runtime([spec("boss"), spec("leaf")], model=model, store=store) as rt:
        rt.subscribe(events)
        outcome = rt.run("boss", "job", timeout=2, wait=WAIT)
        assert outcome.status is RunStatus.TIMED_OUT
        assert outcome.error == "boss ran past its 2 s timeout"
        (leaf,) = rt.runs(agent="leaf")
        assert leaf.status is RunStatus.CANCELLED
        assert set(events.terminal_counts().values()) == {1}
        assert len(events.terminal_counts()) == 2
