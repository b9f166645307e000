"""Stopping a tree lets none of its parked runs go on, with real actors and threads.

A root under one slot lends it to its working child (it parks), then mail wakes it: it is
queued for its slot back. Stopping the tree ends the child first (deepest first); the slot it
frees must not let the root go on (``Unpark``) before the stop reaches it: its function would
run on past its ``receive`` (a tool call, a mail sent) after its tree was stopped
(``Lifecycle._cancel_walk``; tests/supervision/test_cancel_queued.py shows the decisions)."""

from __future__ import annotations

import threading

from polling import wait_until
from subagents import FunctionAgent, Limits, Runtime
from subagents.behaviour.function import AgentContext
from subagents.messages import Event, EventKind, RunStatus

from .conftest import WAIT, Events


def test_a_stopped_trees_parked_root_does_not_run_on_past_what_woke_it() -> None:
    child_started, release_child, ran_on = threading.Event(), threading.Event(), threading.Event()

    async def root(ctx: AgentContext) -> str:
        await ctx.spawn("child", "work", background=True)  # queued: the one slot is the root's
        await ctx.receive(timeout=WAIT)  # waits: it parks, and its child starts
        ran_on.set()  # what would be a tool call or a mail sent
        return "ran on"

    def child(ctx: AgentContext) -> str:
        child_started.set()
        release_child.wait(WAIT)  # working, holding the slot, until the test is over
        return "late"

    events = Events()
    unparked: list[str] = []

    def hold_the_stop(event: Event) -> None:
        """On the supervisor's thread: had the walk let the root go on, the root's agent is
        given the time to do so before the stop that follows reaches it."""
        if event.kind is EventKind.UNPARKED and event.agent == "root":
            unparked.append(event.run_id)
        elif event.kind is EventKind.CANCELLED and event.run_id in unparked:
            ran_on.wait(WAIT)

    agents = [FunctionAgent.create("root", root), FunctionAgent.create("child", child)]
    with Runtime(agents, limits=Limits(max_concurrency=1)) as rt:
        rt.subscribe(events)
        rt.subscribe(hold_the_stop)
        try:
            handle = rt.spawn("root", "go", timeout=WAIT)
            assert child_started.wait(WAIT)
            events.wait_count(EventKind.PARKED, "root", 1)
            rt.send(handle.run_id, "wake up")  # held back: the root asks for a slot again
            wait_until(lambda: rt.stats().queued == 1, "the root queued for its slot back")
            rt.stop(handle.run_id)
            outcome = handle.result(WAIT)
        finally:
            release_child.set()
    assert outcome.status is RunStatus.CANCELLED, outcome
    assert unparked == [] and not ran_on.is_set()
    assert [e.run_id for e in events.of(EventKind.STARTED, "root")] == [handle.run_id]
