"""A concurrency limit smaller than a tree does not deadlock it: when every slot is held by a
run waiting for queued children, a queued run starts over the limit, and the runs working at
any moment stay within it."""

from __future__ import annotations

import threading
from typing import Any

from subagents import FunctionAgent, Limits, Runtime, ScriptedModel
from subagents.behaviour.function import AgentContext
from subagents.messages import RunStatus


def test_parents_waiting_on_queued_children_do_not_deadlock() -> None:
    working = 0
    peak_working = 0
    lock = threading.Lock()

    def helper(ctx: AgentContext) -> str:
        nonlocal working, peak_working
        with lock:
            working += 1
            peak_working = max(peak_working, working)
        with lock:
            working -= 1
        return f"helped {ctx.task}"

    async def worker(ctx: AgentContext) -> str:
        out = await ctx.spawn("helper", ctx.task)
        return str(out.result)

    async def lead(ctx: AgentContext) -> list[Any]:
        outs = await ctx.gather(*(ctx.spawn("worker", f"part {i}") for i in range(3)))
        return [o.result for o in outs]

    agents = [
        FunctionAgent.create("lead", lead),
        FunctionAgent.create("worker", worker),
        FunctionAgent.create("helper", helper),
    ]
    # lead + 3 workers fill the 4 slots, all waiting; the 3 helpers they wait for are queued
    with Runtime(agents, model=ScriptedModel(), limits=Limits(max_concurrency=4)) as rt:
        outcome = rt.run("lead", "go", wait=20, timeout=15)
    assert outcome.status is RunStatus.COMPLETED
    assert outcome.result == '["helped part 0","helped part 1","helped part 2"]'
    assert peak_working <= 1  # only the helpers did work; never more than the limit
