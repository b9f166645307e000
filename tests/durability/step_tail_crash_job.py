"""Half a job for test_step_tail_crash: a parent whose one step spawns ``CHILDREN`` workers
under a limit of one at a time, so that the step's first decision starts one and queues the
rest, and the rest of the step is held (``actors/step_tail.py``, its timer set a minute off);
the process dies (os._exit) in that window, with the first decision's children recorded and
the rest not. It prints how many workers the store held when it died. A second argument:
the parent's token budget (its children are each granted what it has left)."""

from __future__ import annotations

import os
import sys
import threading

from subagents import Limits, Runtime, SQLiteStore
from subagents.actors import step_tail
from subagents.actors.spawn_group import STEP_SPAWNS_MOST
from subagents.behaviour.function import AgentContext, FunctionAgent

CHILDREN = STEP_SPAWNS_MOST + 20
LIMITS = Limits(max_concurrency=2, per_agent=1, max_children=CHILDREN, queue_bound=500)


def agents(hold: threading.Event | None) -> list[FunctionAgent]:
    """The parent and its workers; each worker waits for ``hold`` (None: ends at once)."""

    def worker(ctx: AgentContext) -> str:
        if hold is not None:
            hold.wait(60)
        return ctx.task

    async def parent(ctx: AgentContext) -> str:
        done = await ctx.gather(*[ctx.spawn("worker", f"t{i}") for i in range(CHILDREN)])
        return str(sum(1 for o in done if o.status == "completed"))

    return [FunctionAgent.create("worker", worker), FunctionAgent.create("parent", parent)]


def main(db: str, budget: int | None) -> None:
    step_tail.TAIL_S = 60.0  # the held rest waits for a message, and none comes
    spawned = threading.Semaphore(0)
    rt = Runtime(agents(threading.Event()), store=SQLiteStore(db), limits=LIMITS, command_poll_s=60)
    rt.subscribe(
        lambda e: spawned.release() if (e.kind, e.agent) == ("spawned", "worker") else None
    )
    rt.spawn("parent", "go", token_budget=budget)
    for _ in range(STEP_SPAWNS_MOST):
        assert spawned.acquire(timeout=60)
    print(len(SQLiteStore(db).list_runs(agent="worker")), flush=True)
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else None)
