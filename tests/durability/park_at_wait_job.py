"""Four runs that wait for mail, started with ``spawn_many`` on one slot per agent and an
SQLite store: the second and third park at their wait by themselves (``at_wait``), then the
process waits to be killed. Usage: park_at_wait_job.py DB. Prints ``<event> <agent> <data>``
per event, then ``ready <run ids>`` once three have parked (the fourth holds the slot)."""

from __future__ import annotations

import sys
import threading

from job_kit import say

from subagents import Limits, Runtime, SQLiteStore
from subagents.behaviour.function import AgentContext
from subagents.messages import Event, EventKind

RUNS = 4


async def idle(ctx: AgentContext) -> str:
    mail = await ctx.receive(timeout=600)
    return "no mail" if mail is None else f"{ctx.task}:{mail.content}"


def main(db: str) -> int:
    parked = threading.Semaphore(0)

    def show(event: Event) -> None:
        say(f"{event.kind} {event.agent} {sorted(event.data)}")
        if event.kind is EventKind.PARKED:
            parked.release()

    with Runtime({"idle": idle}, store=SQLiteStore(db), limits=Limits(per_agent=1)) as rt:
        rt.subscribe(show)
        handles = rt.spawn_many([("idle", str(i)) for i in range(RUNS)], timeout=600)
        for _ in range(RUNS - 1):
            parked.acquire()
        say("ready " + " ".join(h.run_id for h in handles))  # type: ignore[union-attr]
        threading.Event().wait()  # until the SIGKILL
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
