"""A step's spawns past those it could start are decided a little later
(``actors/step_tail.py``): before the next message the supervisor handles, whatever it is,
or when ``TAIL_S`` has passed; in the order the step asked for them, and never after a
message that came later."""

from __future__ import annotations

import threading

import pytest

from polling import wait_until
from subagents.actors import step_tail
from subagents.actors.spawn_group import STEP_SPAWNS_MOST
from subagents.behaviour.function import AgentContext, FunctionAgent
from subagents.messages import Event, EventKind
from subagents.runtime import Runtime
from subagents.store.memory import MemoryStore
from subagents.supervision.limits import Limits

from .conftest import WAIT

CHILDREN = STEP_SPAWNS_MOST + 50
"""One decision that starts one child and queues the rest, then a tail of 50 held."""


def _fan_out(release: threading.Event) -> tuple[list[FunctionAgent], Limits]:
    """A parent whose one step spawns ``CHILDREN`` ``held`` children (one at a time: the
    others queue) and gathers them; each child keeps its slot until ``release``."""

    def held(ctx: AgentContext) -> str:
        assert release.wait(WAIT)
        return ctx.task

    async def parent(ctx: AgentContext) -> str:
        handles = [ctx.spawn("held", f"c{i}") for i in range(CHILDREN)]
        done = await ctx.gather(*handles)
        return str(sum(1 for o in done if o.status == "completed"))

    agents = [FunctionAgent.create("held", held), FunctionAgent.create("parent", parent)]
    limits = Limits(max_concurrency=3, per_agent=1, max_children=CHILDREN, queue_bound=500)
    return agents, limits


def test_a_held_tail_is_decided_before_a_later_message_so_the_queue_keeps_its_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A root spawn told while a step's tail is held (no timer due for a minute) is decided
    after it: it queues behind every child of the step, in the order they were asked for."""
    monkeypatch.setattr(step_tail, "TAIL_S", WAIT)
    release = threading.Event()
    spawned: list[str] = []

    def on_event(event: Event) -> None:
        if event.agent == "held" and event.kind == EventKind.SPAWNED:
            spawned.append(event.data["task"])

    agents, limits = _fan_out(release)
    # (no command poll meanwhile: it is a message, and would take the tail before the spawn)
    with Runtime(agents, store=MemoryStore(), limits=limits, command_poll_s=WAIT) as rt:
        rt.subscribe(on_event)
        parent = rt.spawn("parent", "go")
        wait_until(lambda: len(spawned) >= STEP_SPAWNS_MOST, "the step's first decision")
        assert len(rt.runs(agent="held")) == STEP_SPAWNS_MOST  # the rest held: not decided
        late = rt.spawn("held", "late root")  # decided after the tail, not before it
        release.set()
        assert parent.result(WAIT).result == str(CHILDREN)
        assert late.result(WAIT).result == "late root"
    assert spawned == [f"c{i}" for i in range(CHILDREN)] + ["late root"]


def test_a_held_tail_is_decided_when_its_time_is_up_with_no_other_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Nothing else reaches the supervisor (every child holds its slot): the timer decides
    the tail; each child is spawned and queued, its record kept, while the first still runs."""
    monkeypatch.setattr(step_tail, "TAIL_S", 0.05)
    release = threading.Event()
    store = MemoryStore()
    queued: list[str] = []

    def on_event(event: Event) -> None:
        if event.agent == "held" and event.kind == EventKind.QUEUED:
            queued.append(event.run_id)

    agents, limits = _fan_out(release)
    # (no command poll meanwhile: it is a message, and would take the tail before the timer)
    with Runtime(agents, store=store, limits=limits, command_poll_s=WAIT) as rt:
        rt.subscribe(on_event)
        parent = rt.spawn("parent", "go")
        try:
            wait_until(lambda: len(queued) == CHILDREN - 1, "every queued child's QUEUED event")
            listed = rt.runs(agent="held")
        finally:
            release.set()
        assert parent.result(WAIT).result == str(CHILDREN)
    assert [r.task for r in listed] == [f"c{i}" for i in range(CHILDREN)]


def test_a_runtime_closed_with_a_tail_held_keeps_every_childs_record(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Closed while a step's tail is held: the tail is decided first, so every child the
    step asked for has its record, ended, none left unfinished for another runtime."""
    monkeypatch.setattr(step_tail, "TAIL_S", WAIT)
    release = threading.Event()
    store = MemoryStore()
    spawned: list[str] = []

    def on_event(event: Event) -> None:
        if event.agent == "held" and event.kind == EventKind.SPAWNED:
            spawned.append(event.data["task"])
        if event.kind == EventKind.CANCELLED:  # the close began: the running child ends
            release.set()

    agents, limits = _fan_out(release)
    try:
        with Runtime(agents, store=store, limits=limits, command_poll_s=WAIT) as rt:
            rt.subscribe(on_event)
            rt.spawn("parent", "go")
            wait_until(lambda: len(spawned) >= STEP_SPAWNS_MOST, "the step's first decision")
            assert len(store.list_runs(agent="held")) == STEP_SPAWNS_MOST  # the rest held
    finally:
        release.set()
    children = [r for r in store.list_runs() if r.agent == "held"]
    assert sorted(r.task for r in children) == sorted(f"c{i}" for i in range(CHILDREN))
    assert all(r.status.terminal for r in children), {r.status for r in children}


def test_a_parent_stopped_while_its_steps_rest_is_held_stops_every_child_it_asked_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The stop is an ask: the held rest is decided before it, so the stop names and ends
    every child of the step, none started or left queued after its parent ended."""
    monkeypatch.setattr(step_tail, "TAIL_S", WAIT)
    release = threading.Event()
    store = MemoryStore()
    spawned: list[str] = []

    def on_event(event: Event) -> None:
        if event.agent == "held" and event.kind == EventKind.SPAWNED:
            spawned.append(event.data["task"])

    agents, limits = _fan_out(release)
    try:
        with Runtime(agents, store=store, limits=limits, command_poll_s=WAIT) as rt:
            rt.subscribe(on_event)
            parent = rt.spawn("parent", "go")
            wait_until(lambda: len(spawned) >= STEP_SPAWNS_MOST, "the step's first decision")
            stopped = rt.stop(parent.run_id)
            release.set()
            assert parent.result(WAIT).status == "cancelled"
            children = rt.runs(agent="held")
            assert len(stopped) == CHILDREN + 1, len(stopped)
            assert sorted(r.task for r in children) == sorted(f"c{i}" for i in range(CHILDREN))
            wait_until(
                lambda: all(r.status.terminal for r in rt.runs(agent="held")), "every child ended"
            )
            assert {r.status for r in rt.runs(agent="held")} == {"cancelled"}
    finally:
        release.set()


def test_a_steps_child_of_another_agent_with_free_slots_is_not_held_behind_the_queue(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The step's rest holds a child of another agent, whose slots are free: the rest is
    decided at once (no timer due for a minute, no other message), so that child runs and
    ends while every ``held`` child still waits; the ``held`` ones keep the step's order."""
    monkeypatch.setattr(step_tail, "TAIL_S", 10 * WAIT)  # (longer than the wait below)
    release, quick_ended = threading.Event(), threading.Event()
    spawned: list[str] = []

    def on_event(event: Event) -> None:
        if event.agent == "held" and event.kind == EventKind.SPAWNED:
            spawned.append(event.data["task"])
        if event.agent == "quick" and event.kind == EventKind.COMPLETED:
            quick_ended.set()

    def held(ctx: AgentContext) -> str:
        assert release.wait(WAIT)
        return ctx.task

    def quick(ctx: AgentContext) -> str:
        return ctx.task

    async def parent(ctx: AgentContext) -> str:
        handles = [ctx.spawn("held", f"c{i}") for i in range(CHILDREN)]
        handles.append(ctx.spawn("quick", "other agent"))
        done = await ctx.gather(*handles)
        return str(sum(1 for o in done if o.status == "completed"))

    agents = [
        FunctionAgent.create("held", held),
        FunctionAgent.create("quick", quick),
        FunctionAgent.create("parent", parent),
    ]
    limits = Limits(max_concurrency=3, per_agent=1, max_children=CHILDREN + 1, queue_bound=500)
    # (no command poll within the wait: a message, it would take a held tail)
    with Runtime(agents, store=MemoryStore(), limits=limits, command_poll_s=10 * WAIT) as rt:
        rt.subscribe(on_event)
        parent_run = rt.spawn("parent", "go")
        try:
            assert quick_ended.wait(WAIT), "the other agent's child waited behind the queue"
            assert len(rt.runs(agent="held")) == CHILDREN  # decided with it, not held
        finally:
            release.set()
        assert parent_run.result(WAIT).result == str(CHILDREN + 1)
    assert spawned == [f"c{i}" for i in range(CHILDREN)]


def test_a_steps_rest_is_held_only_behind_its_own_parents_queued_children(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Runs of ``child`` are queued, but another parent's (``narrow``: one child at a time):
    a step of ``wide`` spawning ``child`` runs that all fit is decided at once, not held
    behind those (its rest would start now, its key is not the queued runs')."""
    monkeypatch.setattr(step_tail, "TAIL_S", 10 * WAIT)  # (longer than the wait below)
    release = threading.Event()
    started: list[str] = []
    queued = threading.Event()

    def on_event(event: Event) -> None:
        if event.agent == "child" and event.kind == EventKind.STARTED:
            started.append(event.run_id)
        if event.agent == "child" and event.kind == EventKind.QUEUED:
            queued.set()

    def child(ctx: AgentContext) -> str:
        assert release.wait(WAIT)
        return ctx.task

    async def narrow(ctx: AgentContext) -> str:
        done = await ctx.gather(ctx.spawn("child", "a0"), ctx.spawn("child", "a1"))
        return str(len(done))

    async def wide(ctx: AgentContext) -> str:
        done = await ctx.gather(*[ctx.spawn("child", f"b{i}") for i in range(CHILDREN)])
        return str(sum(1 for o in done if o.status == "completed"))

    agents = [
        FunctionAgent.create("child", child),
        FunctionAgent.create("narrow", narrow, max_children=1),
        FunctionAgent.create("wide", wide),
    ]
    limits = Limits(
        max_concurrency=CHILDREN + 4, per_agent=CHILDREN + 2, max_children=CHILDREN, queue_bound=500
    )
    # (no command poll within the wait: a message, it would take a held tail)
    with Runtime(agents, store=MemoryStore(), limits=limits, command_poll_s=10 * WAIT) as rt:
        rt.subscribe(on_event)
        first = rt.spawn("narrow", "go")
        try:
            assert queued.wait(WAIT), "narrow's second child queued"
            second = rt.spawn("wide", "go")
            wait_until(lambda: len(started) == 1 + CHILDREN, "wide's children started", WAIT)
        finally:
            release.set()
        assert first.result(WAIT).result == "2"
        assert second.result(WAIT).result == str(CHILDREN)


def test_a_steps_rest_whose_definition_now_has_another_tier_is_not_held_behind_the_old_tier(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``a1`` (agent ``child``) queues behind tier 1 (one at a time); ``child`` is then
    reloaded with tier 2 (no limit). The parent's next step spawns 100 runs of ``other``
    (tier 1: they queue, nothing starts) and then ``b0``, a ``child``: the agent and parent of
    the queued ``a1``, but another slot key, that fits now. So the rest is decided at once:
    ``b0`` runs while ``a1`` still waits, not when the tail's time is up."""
    monkeypatch.setattr(step_tail, "TAIL_S", 10 * WAIT)  # (longer than the wait below)
    release, reloaded = threading.Event(), threading.Event()
    ran: list[str] = []
    queued = threading.Event()

    def on_event(event: Event) -> None:
        if event.agent == "child" and event.kind == EventKind.QUEUED:
            queued.set()

    def child(ctx: AgentContext) -> str:
        ran.append(ctx.task)
        assert release.wait(3 * WAIT)  # (a0 holds tier 1 past the wait below)
        return ctx.task

    async def parent(ctx: AgentContext) -> str:
        await ctx.gather(*[ctx.spawn("child", f"a{i}", background=True) for i in range(2)])
        assert reloaded.wait(WAIT)
        handles = [ctx.spawn("other", f"o{i}") for i in range(STEP_SPAWNS_MOST)]
        done = await ctx.gather(*handles, ctx.spawn("child", "b0"))
        return str(sum(1 for o in done if o.status == "completed"))

    agents = [
        FunctionAgent.create("child", child, tier=1),
        FunctionAgent.create("other", child, tier=1),
        FunctionAgent.create("parent", parent),
    ]
    many = STEP_SPAWNS_MOST + 10
    limits = Limits(
        max_concurrency=many, per_agent=many, max_children=many, per_tier={1: 1}, queue_bound=500
    )
    # (no command poll within the wait: a message, it would take a held tail)
    with Runtime(agents, store=MemoryStore(), limits=limits, command_poll_s=10 * WAIT) as rt:
        rt.subscribe(on_event)
        run = rt.spawn("parent", "go")
        try:
            assert queued.wait(WAIT), "a1 queued behind tier 1"
            rt.registry.register(FunctionAgent.create("child", child, tier=2).spec)
            reloaded.set()
            wait_until(lambda: "b0" in ran, "b0 ran while a1 waits for tier 1", WAIT / 2)
            assert "a1" not in ran
        finally:
            reloaded.set()
            release.set()
        assert run.result(WAIT).result == str(STEP_SPAWNS_MOST + 1)
