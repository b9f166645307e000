"""The lifecycle API an embedder drives a runtime with (issue 13 item 9), with real actors,
threads and SQLite files: runs by requester and stopping everything a requester requested;
waiting on any run (child or root) and on all of them; the usage of a live tree; end events
that carry usage and steps; a synthesis over runs that already exist."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gates import Gate
from subagents.behaviour.function import AgentContext, FunctionAgent
from subagents.behaviour.tools import SPAWN
from subagents.messages import EXTERNAL_SENDER, EventKind, RunStatus
from subagents.models.scripted import ScriptedModel
from subagents.runtime import AgentLike, Runtime, RuntimeClosed
from subagents.store.base import RunStore
from subagents.store.sqlite import SQLiteStore
from subagents.supervision.limits import Limits
from subagents.supervision.synthesis import SynthesisError
from subagents.supervision.usage import tree_usage

from .conftest import WAIT, Events, spec

pytestmark = pytest.mark.usefixtures("no_new_threads")


async def idle(ctx: AgentContext) -> str:
    await ctx.receive(timeout=WAIT * 3)
    return "woke"


async def nest(ctx: AgentContext) -> str:
    """Spawns one idle grandchild, then waits: a subtree under a child."""
    await ctx.spawn("idle", "below", background=True)
    await ctx.receive(timeout=WAIT * 3)
    return "nested"


def boss_of(n: int, agent: str = "idle") -> Callable[[AgentContext], Any]:
    async def boss(ctx: AgentContext) -> str:
        for i in range(n):
            await ctx.spawn(agent, f"job {i}", background=True)
        while True:  # its children's background results come as mail too
            mail = await ctx.receive(timeout=WAIT * 3)
            if mail is None or mail.content == "go on":
                return "boss done"

    return boss


def gated(gates: dict[str, Gate]) -> Callable[[AgentContext], Any]:
    """A function agent that ends when the test opens its task's gate; returns its task."""

    def run(ctx: AgentContext) -> str:
        assert gates[ctx.task].wait(WAIT), f"gate {ctx.task} never opened"
        return ctx.task

    return run


# ---- runs by requester, stop everything a requester requested ------------------------------


def test_runs_by_requester_lists_a_runs_children_and_the_roots(store: RunStore) -> None:
    events = Events()
    agents: list[AgentLike] = [FunctionAgent.create("boss", boss_of(3)), idle]
    with Runtime(agents, store=store) as rt:
        rt.subscribe(events)
        boss = rt.spawn("boss", "b")
        other = rt.spawn("idle", "alone")
        events.wait_count(EventKind.WAITING, "idle", 4)
        children = rt.runs(requester=boss.run_id)
        assert [c.task for c in children] == ["job 0", "job 1", "job 2"]
        assert {c.parent_run_id for c in children} == {boss.run_id}
        roots = rt.runs(requester=EXTERNAL_SENDER)
        assert [r.run_id for r in roots] == [boss.run_id, other.run_id]
        assert rt.runs(requester=other.run_id) == []
        live = rt.runs(requester=boss.run_id, status=[RunStatus.RUNNING, RunStatus.WAITING])
        assert len(live) == 3
        with pytest.raises(LookupError, match="no run with id 'r-nope'"):
            rt.runs(requester="r-nope")


def test_stop_all_stops_every_run_a_run_requested_with_their_subtrees(store: RunStore) -> None:
    events = Events()
    agents: list[AgentLike] = [
        FunctionAgent.create("boss", boss_of(2, "nest")),
        FunctionAgent.create("nest", nest),
        idle,
    ]
    with Runtime(agents, store=store) as rt:
        rt.subscribe(events)
        boss = rt.spawn("boss", "b")
        bystander = rt.spawn("idle", "bystander")
        events.wait_count(EventKind.WAITING, "idle", 3)  # 2 grandchildren and the bystander
        events.wait_count(EventKind.WAITING, "nest", 2)
        stopped = rt.stop_all(requester=boss.run_id, reason="enough of this")
        assert len(stopped) == 4  # 2 children, 2 grandchildren
        children = {c.run_id for c in rt.runs(requester=boss.run_id)}
        assert children <= set(stopped)
        for run_id in stopped:
            record = rt.get(run_id)
            assert record is not None and record.status is RunStatus.CANCELLED
            assert record.outcome is not None
            if run_id in children:  # the one reason, on each run it stopped
                assert record.outcome.error == "enough of this"
        # the requester itself and the runs it did not request go on
        assert not boss.status.terminal
        assert bystander.status is RunStatus.WAITING
        assert rt.stop_all(requester=boss.run_id) == ()  # nothing it requested is live
        rt.send(boss.run_id, "go on")
        assert boss.result(WAIT).value == "boss done"


def test_stop_all_of_the_outside_stops_every_root_and_queued_runs_never_start(
    store: RunStore,
) -> None:
    gates = {f"t{i}": Gate() for i in range(4)}
    events = Events()
    agents: list[AgentLike] = [FunctionAgent.create("gated", gated(gates))]
    with Runtime(agents, store=store, limits=Limits(max_concurrency=2)) as rt:
        rt.subscribe(events)
        handles = [rt.spawn("gated", f"t{i}") for i in range(4)]  # 2 working, 2 queued
        events.wait_count(EventKind.STARTED, "gated", 2)
        assert [h.status for h in handles[2:]] == [RunStatus.QUEUED] * 2
        stopped = rt.stop_all(requester=EXTERNAL_SENDER, reason="closing shop")
        for gate in gates.values():  # the stopped functions' threads may go now
            gate.set()
        assert sorted(stopped) == sorted(h.run_id for h in handles)
        for handle in handles:
            outcome = handle.result(WAIT)
            assert outcome.status is RunStatus.CANCELLED and outcome.error == "closing shop"
        started = {e.run_id for e in events.of(EventKind.STARTED)}
        assert started == {handles[0].run_id, handles[1].run_id}  # the queued never started


def test_stop_all_refuses_an_unknown_requester_and_a_bad_one() -> None:
    with Runtime([idle]) as rt:
        with pytest.raises(LookupError, match="no run with id 'r-nope'"):
            rt.stop_all(requester="r-nope")
        with pytest.raises(TypeError, match="requester must be a run id"):
            rt.stop_all(requester="")
        done = rt.run("idle", "x", timeout=0.05, wait=WAIT)  # ends (timed out) at once
        assert done.status is RunStatus.TIMED_OUT
        assert rt.stop_all(requester=done.run_id) == ()  # ended: nothing it requested is live


# ---- waiting on any run -------------------------------------------------------------------


def test_wait_any_returns_the_first_root_to_end_and_an_ended_one_at_once(
    store: RunStore,
) -> None:
    gates = {name: Gate() for name in ("a", "b", "c")}
    agents: list[AgentLike] = [FunctionAgent.create("gated", gated(gates))]
    with Runtime(agents, store=store) as rt:
        a, b, c = (rt.spawn("gated", name) for name in ("a", "b", "c"))
        ids = [a.run_id, b.run_id, c.run_id]
        with pytest.raises(TimeoutError, match="none of"):
            rt.wait_any(ids, timeout=0.05)
        gates["b"].set()
        first = rt.wait_any(ids, timeout=WAIT)
        assert first.run_id == b.run_id and first.value == "b"
        gates["c"].set()
        assert c.result(WAIT).value == "c"
        # both ended already: returned at once, the first of them in the order given
        assert rt.wait_any([c.run_id, b.run_id], timeout=0).run_id == c.run_id
        assert rt.wait_any(ids).run_id == b.run_id
        gates["a"].set()
        outcomes = rt.wait_all([a, b, c], timeout=WAIT)  # handles do as well as ids
        assert [o.value for o in outcomes] == ["a", "b", "c"]
        with pytest.raises(LookupError, match="no run with id 'r-nope'"):
            rt.wait_any([a.run_id, "r-nope"])
        with pytest.raises(ValueError, match="at least one run id"):
            rt.wait_any([])
        # (each raised from inside, naming neither the call nor what was wrong)
        with pytest.raises(TypeError, match=r"wait_all\(\) takes run ids or handles, got int"):
            rt.wait_all(5)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=r"wait_any\(\): run ids are strings, got \['r'\]"):
            rt.wait_any([["r"]])  # type: ignore[list-item]


def test_wait_any_and_wait_all_work_on_children(store: RunStore) -> None:
    gates = {name: Gate() for name in ("x", "y")}

    async def parent(ctx: AgentContext) -> str:
        await ctx.spawn("gated", "x", background=True)
        await ctx.spawn("gated", "y", background=True)
        while True:  # its children's background results come as mail too
            mail = await ctx.receive(timeout=WAIT * 3)
            if mail is None or mail.content == "done":
                return "parent done"

    events = Events()
    agents: list[AgentLike] = [
        FunctionAgent.create("parent", parent),
        FunctionAgent.create("gated", gated(gates)),
    ]
    with Runtime(agents, store=store) as rt:
        rt.subscribe(events)
        boss = rt.spawn("parent", "p")
        events.wait_count(EventKind.STARTED, "gated", 2)
        x, y = (c.run_id for c in rt.runs(requester=boss.run_id))
        waited: list[Any] = []
        waiter = threading.Thread(target=lambda: waited.append(rt.wait_any([x, y], timeout=WAIT)))
        waiter.start()  # waits before either ends: woken by the child's end
        gates["y"].set()
        waiter.join(WAIT)
        assert not waiter.is_alive()
        assert waited[0].run_id == y and waited[0].value == "y"
        gates["x"].set()
        assert [o.value for o in rt.wait_all([x, y], timeout=WAIT)] == ["x", "y"]
        with pytest.raises(TimeoutError, match=boss.run_id):
            rt.wait_all([x, boss.run_id], timeout=0.05)
        rt.send(boss.run_id, "done")
        assert rt.wait_any([boss.run_id], timeout=WAIT).value == "parent done"


# ---- usage of a live tree; end events carry usage and steps -------------------------------


def _boss_and_worker_model(worker_delay: float) -> ScriptedModel:
    return ScriptedModel(
        {
            "boss": [
                {
                    "tool_calls": [{"name": SPAWN, "input": {"agent": "worker", "task": "w"}}],
                    "usage": {"input_tokens": 100, "output_tokens": 10, "cost_usd": 0.5},
                },
                {"text": "all done", "usage": {"input_tokens": 200, "output_tokens": 20}},
            ],
            "worker": [
                {"text": "first", "delay": worker_delay, "usage": {"input_tokens": 7}},
            ],
        }
    )


def test_usage_of_a_live_tree_totals_and_per_run(store: RunStore) -> None:
    events = Events()
    model = _boss_and_worker_model(worker_delay=60)  # the worker stays in its model call
    with Runtime([spec("boss"), spec("worker")], model=model, store=store) as rt:
        rt.subscribe(events)
        boss = rt.spawn("boss", "b")
        events.wait_count(EventKind.STARTED, "worker", 1)
        events.wait_count(EventKind.WAITING, "boss", 1)
        usage = rt.usage(boss.run_id)
        assert usage.run_id == boss.run_id and usage.status is RunStatus.WAITING
        assert (usage.runs, usage.live) == (2, 2)
        assert usage.steps == 1 and usage.tool_calls == 1  # the boss's spawn
        assert usage.usage.input_tokens == 100 and usage.usage.output_tokens == 10
        assert usage.cost_usd == 0.5 and usage.model_calls == 1
        assert usage.tokens == 110
        top, worker = usage.per_run
        assert (top.run_id, top.agent, top.steps, top.tool_calls) == (boss.run_id, "boss", 1, 1)
        assert (worker.agent, worker.parent_run_id, worker.steps) == ("worker", boss.run_id, 0)
        assert worker.status is RunStatus.RUNNING
        assert rt.usage(worker.run_id).runs == 1  # a subtree: the worker alone
        assert boss.usage().per_run == usage.per_run
        rt.stop(boss.run_id)
        ended = rt.usage(boss.run_id)
        assert ended.live == 0 and ended.usage == usage.usage
        with pytest.raises(LookupError, match="no run with id 'r-nope'"):
            rt.usage("r-nope")


def test_usage_after_close_is_read_from_the_store(store: RunStore) -> None:
    """After close a handle's status and result answer (from the handle, the store), and so
    does its usage now: it raised ``RuntimeClosed`` (it asked the supervisor for its fresher
    records first), though a closed runtime's store holds every record there is."""
    model = _boss_and_worker_model(worker_delay=0)
    with Runtime([spec("boss"), spec("worker")], model=model, store=store) as rt:
        boss = rt.spawn("boss", "b")
        assert boss.result(WAIT).status is RunStatus.COMPLETED
        before = boss.usage()
    assert boss.status is RunStatus.COMPLETED
    after = boss.usage()
    assert after == before and (after.runs, after.live) == (2, 0)
    assert after.usage.input_tokens == 307 and after.model_calls == 3
    assert rt.usage(boss.run_id) == before
    with pytest.raises(LookupError, match="no run with id 'r-nope'"):
        rt.usage("r-nope")


def test_usage_after_close_of_a_store_the_runtime_opened_says_so(tmp_path: Path) -> None:
    """A store the runtime opened from a path is closed with it: usage says so, and how to
    read it, as ``RuntimeClosed`` (not the store's own error); a store opened on the file
    reads it."""
    model = _boss_and_worker_model(worker_delay=0)
    path = tmp_path / "runs.db"
    with Runtime([spec("boss"), spec("worker")], model=model, store=path) as rt:
        boss = rt.spawn("boss", "b")
        assert boss.result(WAIT).status is RunStatus.COMPLETED
        before = boss.usage()
    with pytest.raises(RuntimeClosed, match=r"so is the store it opened .*SQLiteStore\(path\)"):
        boss.usage()
    store = SQLiteStore(path)
    try:
        assert tree_usage(boss.run_id, store.list_runs(root_run_id=boss.run_id)) == before
    finally:
        store.close()


def test_usage_after_close_of_a_store_of_ones_own_that_failed_says_the_stores_error(
    tmp_path: Path,
) -> None:
    """The caller's own store, which the runtime did not open and does not close: after
    the runtime's close, a failure reading it (here the caller closed it) is the store's
    own error, not ``RuntimeClosed`` saying "so is the store it opened" (it did not)."""
    from subagents.store.base import StoreError

    model = _boss_and_worker_model(worker_delay=0)
    store = SQLiteStore(tmp_path / "runs.db")
    with Runtime([spec("boss"), spec("worker")], model=model, store=store) as rt:
        boss = rt.spawn("boss", "b")
        assert boss.result(WAIT).status is RunStatus.COMPLETED
    assert boss.usage().runs == 2  # read from the caller's store, still open
    store.close()
    with pytest.raises(StoreError) as raised:
        boss.usage()
    assert not isinstance(raised.value, RuntimeClosed)
    assert "the store it opened" not in str(raised.value)


def test_end_events_carry_usage_steps_and_tool_calls(store: RunStore) -> None:
    events = Events()
    model = _boss_and_worker_model(worker_delay=0)
    with Runtime([spec("boss"), spec("worker")], model=model, store=store) as rt:
        rt.subscribe(events)
        outcome = rt.run("boss", "b", wait=WAIT)
        assert outcome.status is RunStatus.COMPLETED
        events.wait_count(EventKind.COMPLETED, "boss", 1)
        (done,) = events.of(EventKind.COMPLETED, "boss")
        assert done.data["steps"] == 2 and done.data["tool_calls"] == 1
        assert done.data["usage"]["input_tokens"] == 300
        assert done.data["usage"]["output_tokens"] == 30
        assert done.data["usage"]["cost_usd"] == 0.5
        assert done.data["usage"]["model_calls"] == 2
        (worker_done,) = events.of(EventKind.COMPLETED, "worker")
        assert worker_done.data["steps"] == 1 and worker_done.data["tool_calls"] == 0
        assert worker_done.data["usage"]["input_tokens"] == 7
        kept = [e for e in store.events(outcome.run_id) if e.kind is EventKind.COMPLETED]
        assert kept[0].data == done.data  # the store keeps what subscribers saw
        record = rt.get(outcome.run_id)
        assert record is not None and record.tool_calls == 1


def test_a_stopped_runs_end_event_carries_what_it_had_used() -> None:
    events = Events()
    model = _boss_and_worker_model(worker_delay=60)
    with Runtime([spec("boss"), spec("worker")], model=model) as rt:
        rt.subscribe(events)
        boss = rt.spawn("boss", "b")
        events.wait_count(EventKind.STARTED, "worker", 1)
        rt.stop(boss.run_id)
        events.wait_count(EventKind.CANCELLED, "boss", 1)
        (cancelled,) = events.of(EventKind.CANCELLED, "boss")
        assert cancelled.data["steps"] == 1 and cancelled.data["tool_calls"] == 1
        assert cancelled.data["usage"]["input_tokens"] == 100


# ---- synthesis over runs that already exist -----------------------------------------------


def test_synthesize_combines_runs_that_already_exist(store: RunStore) -> None:
    def answer(ctx: AgentContext) -> Any:
        if ctx.task == "fail":
            raise RuntimeError("no answer")
        return int(ctx.task)

    agents: list[AgentLike] = [FunctionAgent.create("answer", answer)]
    with Runtime(agents, store=store) as rt:
        handles = [rt.spawn("answer", task) for task in ("1", "1", "2", "fail")]
        ids = [h.run_id for h in handles]
        voted = rt.synthesize(ids, "vote")
        assert voted.value == 1 and voted.sources == (ids[0], ids[1])
        assert [f[0] for f in voted.failed] == [ids[3]]
        assert "no answer" in voted.failed[0][1]
        assert voted.conflicts and voted.conflicts[0].reason.startswith("outvoted")
        collected = rt.synthesize(ids, "collect")
        assert collected.value == [1, 1, 2, None]
        averaged = rt.synthesize(ids[:3], "weighted_average", weights={"answer": 2.0})
        assert averaged.value == pytest.approx(4 / 3)
        assert rt.synthesize(ids[:3], "best_pick", scorer=float).value == 2
        with pytest.raises(SynthesisError, match="unknown synthesis strategy"):
            rt.synthesize(ids, "average")
        with pytest.raises(SynthesisError, match="needs a scorer"):
            rt.synthesize(ids, "best_pick")
        with pytest.raises(LookupError, match="no run with id 'r-nope'"):
            rt.synthesize([ids[0], "r-nope"], "vote")


def test_synthesize_waits_for_live_runs_and_names_those_that_did_not_end() -> None:
    gates = {name: Gate() for name in ("a", "b")}
    agents: list[AgentLike] = [FunctionAgent.create("gated", gated(gates))]
    with Runtime(agents) as rt:
        a, b = rt.spawn("gated", "a"), rt.spawn("gated", "b")
        gates["a"].set()
        a.result(WAIT)
        early = rt.synthesize([a.run_id, b.run_id], "collect", wait=0)
        assert early.value == ["a", None]
        assert early.failed == ((b.run_id, "not ended (running) when the synthesis was made"),)
        results: list[Any] = []
        waiter = threading.Thread(
            target=lambda: results.append(rt.synthesize([a.run_id, b.run_id], "collect"))
        )
        waiter.start()  # waits for b
        gates["b"].set()
        waiter.join(WAIT)
        assert not waiter.is_alive()
        assert results[0].value == ["a", "b"] and results[0].ok


# ---- function agents: ctx.wait_any, ctx.stop_children, ctx.synthesize ----------------------


def test_a_function_agent_waits_for_its_first_child_stops_the_rest_and_synthesizes(
    store: RunStore,
) -> None:
    gates = {name: Gate() for name in ("slow", "fast", "other")}

    async def racer(ctx: AgentContext) -> Any:
        slow = ctx.spawn("gated", "slow")
        fast = ctx.spawn("gated", "fast")
        other = ctx.spawn("gated", "other")
        index, outcome = await ctx.wait_any(slow, fast, other)
        gates["other"].set()
        second = await other
        stopped = await ctx.stop_children("the race is won")
        synthesis = ctx.synthesize([outcome, second], "collect")
        return {
            "index": index,
            "first": outcome.value,
            "stopped": len(stopped),
            "values": synthesis.value,
        }

    events = Events()
    agents: list[AgentLike] = [
        FunctionAgent.create("racer", racer),
        FunctionAgent.create("gated", gated(gates)),
    ]
    with Runtime(agents, store=store) as rt:
        rt.subscribe(events)
        handle = rt.spawn("racer", "go")
        events.wait_count(EventKind.STARTED, "gated", 3)
        gates["fast"].set()
        outcome = handle.result(WAIT)
        assert outcome.status is RunStatus.COMPLETED, outcome
        assert outcome.value == {
            "index": 1,
            "first": "fast",
            "stopped": 1,
            "values": ["fast", "other"],
        }
        (slow,) = rt.runs(requester=handle.run_id, status=RunStatus.CANCELLED)
        assert slow.task == "slow" and slow.outcome is not None
        assert slow.outcome.error == "the race is won"
        gates["slow"].set()  # its thread may still be blocked on the gate: let it go


def test_a_restarted_function_agent_is_handed_the_same_first_child(store: RunStore) -> None:
    """The winner of ``wait_any`` is journaled: a replay is handed the same one even when,
    replayed in order, another child's outcome comes back first."""
    gates = {name: Gate() for name in ("a", "b")}
    crashed = Gate()  # the first attempt's mark, seen by the next wherever it runs

    async def racer(ctx: AgentContext) -> Any:
        a = ctx.spawn("gated", "a")
        b = ctx.spawn("gated", "b")
        index, first = await ctx.wait_any(a, b)
        if not crashed.is_set():
            crashed.set()
            gates["a"].set()  # a ends too, before the restart: replayed first
            await a
            raise RuntimeError("crash after the race")
        return [index, first.value]

    agents: list[AgentLike] = [
        FunctionAgent.create("racer", racer, restart="transient"),
        FunctionAgent.create("gated", gated(gates)),
    ]
    events = Events()
    with Runtime(agents, store=store) as rt:
        rt.subscribe(events)
        handle = rt.spawn("racer", "go")
        events.wait_count(EventKind.STARTED, "gated", 2)
        gates["b"].set()
        outcome = handle.result(WAIT)
        assert outcome.status is RunStatus.COMPLETED, outcome
        assert outcome.value == [1, "b"]
        assert crashed.is_set() and len(events.of(EventKind.RESTARTED, "racer")) == 1
        assert len(rt.runs(agent="gated")) == 2  # spawned once each
