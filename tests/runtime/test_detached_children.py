"""Children that outlive their parent, with real actors and threads: ``ctx.spawn(...,
detach=True)`` and ``spawn_subagent``'s ``detach``; the outcome of a detached child that ends
after its parent reaches the parent's requester as mail; ``Runtime.stop``'s scope."""

from __future__ import annotations

import threading

import pytest

from subagents.behaviour.function import AgentContext, FunctionAgent
from subagents.messages import Event, EventKind, RunStatus
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime

from .conftest import WAIT, Events, spec

pytestmark = pytest.mark.usefixtures("no_new_threads")


class Release:
    """Lets the detached child go on once its parent has ended (set from the event stream,
    on the supervisor's thread, after that end is committed)."""

    def __init__(self, parent_agent: str) -> None:
        self.parent_agent = parent_agent
        self.gate = threading.Event()

    def __call__(self, event: Event) -> None:
        if event.kind is EventKind.COMPLETED and event.agent == self.parent_agent:
            self.gate.set()


def test_a_detached_childs_outcome_reaches_its_parents_requester_as_mail() -> None:
    release = Release("parent")

    async def grand(ctx: AgentContext) -> str | None:
        await ctx.spawn("parent", "hand it off")
        mail = await ctx.receive(timeout=WAIT)
        return None if mail is None else mail.content

    async def parent(ctx: AgentContext) -> str:
        slow_id: str = await ctx.spawn("slow", "take your time", detach=True)
        return slow_id

    def slow(ctx: AgentContext) -> str:
        assert release.gate.wait(WAIT), "the parent never ended"
        return "slow done"

    with Runtime([grand, parent, slow]) as rt:
        rt.subscribe(release)
        outcome = rt.run("grand", "go", wait=WAIT)
        assert outcome.status is RunStatus.COMPLETED, outcome.error
        assert (outcome.result or "").startswith("[detached result]")
        assert '"result":"slow done"' in (outcome.result or "")
        (child,) = rt.runs(agent="slow")
        assert child.detached and child.status is RunStatus.COMPLETED
        (mid,) = rt.runs(agent="parent")
        assert mid.status is RunStatus.COMPLETED and child.parent_run_id == mid.run_id


def test_a_model_spawns_a_child_that_outlives_it() -> None:
    release = Release("lead")

    def worker(ctx: AgentContext) -> str:
        assert release.gate.wait(WAIT), "the lead never ended"
        return "worker done"

    model = ScriptedModel(
        {
            "lead": [
                {
                    "tool_calls": [
                        {
                            "name": "spawn_subagent",
                            "input": {"agent": "worker", "task": "keep at it", "detach": True},
                        }
                    ]
                },
                "lead done",
            ]
        }
    )
    lead = spec("lead", tools=("spawn_subagent",))
    events = Events()
    with Runtime([lead, FunctionAgent.create("worker", worker)], model=model) as rt:
        rt.subscribe(release)
        rt.subscribe(events)
        outcome = rt.run("lead", "start the worker", wait=WAIT)
        assert (outcome.status, outcome.result) == (RunStatus.COMPLETED, "lead done")
        (child,) = rt.runs(agent="worker")
        done = rt.wait_any([child.run_id], timeout=WAIT)
        assert (done.status, done.result) == (RunStatus.COMPLETED, "worker done")
        spawned = events.of(EventKind.SPAWNED, "worker")
        assert spawned and spawned[0].data.get("detached") is True
        # the spawn tool answered at once, with the run id (detach implies background)
        shown = str(model.requests[-1].messages[-1].content)
        assert child.run_id in shown


def test_stop_chooses_its_scope_the_turn_or_the_tree() -> None:
    gate = threading.Event()

    async def lead(ctx: AgentContext) -> str:
        await ctx.spawn("waiter", "a", detach=True)
        await ctx.spawn("waiter", "b")  # awaited: the lead is stopped while it waits
        return "unreachable"

    def waiter(ctx: AgentContext) -> str:
        gate.wait(WAIT)
        return f"waiter {ctx.task} done"

    events = Events()
    with Runtime([lead, waiter]) as rt:
        rt.subscribe(events)
        first = rt.spawn("lead", "go")
        events.wait_count(EventKind.STARTED, "waiter", 2)
        with pytest.raises(ValueError, match="scope must be 'tree' or 'turn', got 'all'"):
            rt.stop(first.run_id, scope="all")  # type: ignore[arg-type]
        stopped = rt.stop(first.run_id, scope="turn")
        detached, attached = sorted(rt.runs(agent="waiter"), key=lambda r: r.task)
        assert sorted(stopped) == sorted([first.run_id, attached.run_id])
        assert rt.get(detached.run_id).status is RunStatus.RUNNING
        second = rt.spawn("lead", "again")
        events.wait_count(EventKind.STARTED, "waiter", 4)
        stopped = rt.stop(second.run_id)  # the tree, by default: its detached child too
        assert len(stopped) == 3
        gate.set()
        done = rt.wait_any([detached.run_id], timeout=WAIT)
        assert (done.status, done.result) == (RunStatus.COMPLETED, "waiter a done")
        assert rt.get(first.run_id).status is RunStatus.CANCELLED


def test_detached_children_are_bound_by_their_ancestors_budget_after_it_ended() -> None:
    """Each detached child is carved what its parent had left, and their steps are charged to
    it: once the tree's spending passes the lead's budget, a detached child is stopped at
    its next step, though the lead has ended (before the fix each spent its whole carve, so
    two of them spent twice the tree's budget). Each child first waits for a mail the test
    sends once the lead has ended: spending before that would charge the lead while it still
    runs (under load the children's steps could reach the budget before the lead's end did)."""
    wait = {
        "tool_calls": [{"name": "wait_for_message", "input": {"timeout": WAIT}}],
        "usage": {"input_tokens": 0, "output_tokens": 0},
    }
    step = {
        "tool_calls": [{"name": "check_mailbox", "input": {}}],
        "usage": {"input_tokens": 100, "output_tokens": 0},
    }
    model = ScriptedModel({"spender": [wait] + [step] * 20 + ["spent"]})

    async def lead(ctx: AgentContext) -> str:
        await ctx.spawn("spender", "a", detach=True)
        await ctx.spawn("spender", "b", detach=True)
        return "lead done"

    spender = spec("spender", tools=("check_mailbox", "wait_for_message"))
    with Runtime([lead, spender], model=model) as rt:
        outcome = rt.run("lead", "go", wait=WAIT, token_budget=1000)
        assert outcome.status is RunStatus.COMPLETED
        children = rt.runs(agent="spender")
        assert len(children) == 2
        for child in children:
            rt.send(child.run_id, "spend")
        outcomes = [rt.wait_any([c.run_id], timeout=WAIT) for c in children]
    spent = sum(o.usage.total_tokens for o in outcomes)
    # over by at most the steps in flight when it went over: one per detached child
    assert spent <= 1000 + 2 * 100, spent
    errors = [o.error or "" for o in outcomes]
    assert any(e.startswith("its ancestor lead used") for e in errors), errors
    assert all(o.status is RunStatus.BUDGET_EXCEEDED for o in outcomes)
