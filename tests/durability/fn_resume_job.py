"""Half a job for test_function_resume: a function agent waiting on a child it spawned and
a mail it sent; the process dies (os._exit) while the child still works."""

from __future__ import annotations

import os
import sys
import threading

from subagents import AgentSpec, FunctionAgent, Runtime, ScriptedModel, SQLiteStore
from subagents.behaviour.function import AgentContext


async def boss(ctx: AgentContext) -> str:
    helper = await ctx.spawn("helper", "stand by", background=True)
    await ctx.send(helper, "hello once")
    out = await ctx.spawn("worker", "expensive job")
    return f"boss got: {out.result}"


def agents(delay: float) -> tuple[list[object], ScriptedModel]:
    model = ScriptedModel(
        {
            "worker": [{"text": "done {task}", "delay": delay}],
            "helper": [
                {"tool_calls": [{"name": "wait_for_message", "input": {"timeout": 30}}]},
                {"text": "helper read {mail_content}", "delay": delay},
            ],
        },
        fresh_ids=True,
    )
    specs = [
        FunctionAgent.create("boss", boss),
        AgentSpec(name="worker", description="works"),
        AgentSpec(name="helper", description="helps"),
    ]
    return list(specs), model


def main(db: str) -> None:
    worker_started = threading.Event()
    specs, model = agents(60)
    rt = Runtime(specs, model=model, store=SQLiteStore(db))  # type: ignore[arg-type]
    rt.subscribe(
        lambda e: worker_started.set() if (e.kind, e.agent) == ("started", "worker") else None
    )
    rt.spawn("boss", "go")
    assert worker_started.wait(60), "the worker never started"
    os._exit(0)  # die while the worker works and the helper waits


if __name__ == "__main__":
    main(sys.argv[1])
