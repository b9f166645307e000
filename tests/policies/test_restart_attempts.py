"""A restarted run is ended only by its current start, never by an earlier one still working."""

from __future__ import annotations

import threading
from typing import Any

from subagents import FunctionAgent, Runtime, ScriptedModel
from subagents.behaviour.function import AgentContext
from subagents.messages import RunStatus


def test_a_stale_ending_of_an_earlier_start_does_not_end_the_restarted_run() -> None:
    starts = iter(range(1, 100))
    restarted, second_started, release = threading.Event(), threading.Event(), threading.Event()

    def child(ctx: AgentContext) -> str:
        raise RuntimeError("child boom")

    def parent(ctx: AgentContext) -> str:
        # the same call in every start (a restart replays it: no second child)
        ctx.spawn("child", "x", background=True, on_failure="fail_parent")
        if next(starts) == 1:
            assert restarted.wait(60)  # still busy when the supervisor restarts the run
            return "stale result of the first start"
        second_started.set()
        assert release.wait(60)
        return "result of the second start"

    def on_event(event: Any) -> None:
        if event.kind == "restarted" and event.agent == "parent":
            restarted.set()

    agents = [
        FunctionAgent.create("parent", parent, restart="transient"),
        FunctionAgent.create("child", child),
    ]
    with Runtime(agents, model=ScriptedModel()) as rt:
        rt.subscribe(on_event)
        handle = rt.spawn("parent", "go")
        assert second_started.wait(60)
        assert not handle.done  # the first start's ending was not taken for this one
        release.set()
        outcome = handle.result(timeout=60)
    assert outcome.status is RunStatus.COMPLETED
    assert outcome.result == "result of the second start"
    assert len(rt.runs(agent="child")) == 1
