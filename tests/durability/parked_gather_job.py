"""A parent gathering children on one slot, killed (SIGKILL) and taken up again.

On ``max_concurrency=1`` the parent lends its slot (parks) while its children run one at a
time, and takes each child's end that leaves the gather waiting without its slot
(``FunctionBehaviour.only_records``). Usage: parked_gather_job.py DB OUT [hold-last]. Starts
the job, or takes it up when the store already holds it, prints ``ready`` and then one
``<event> <agent>`` line per event, and writes the outcome to OUT as JSON. ``hold-last``: the
last child never ends (the run to be killed), so the job cannot finish before the test's
SIGKILL lands, however late a loaded machine delivers it.
"""

from __future__ import annotations

import sys
import threading

from job_kit import say, spawn_or_attach, write_outcome

from subagents import Limits, Runtime, SQLiteStore
from subagents.behaviour.function import AgentContext
from subagents.messages import Event

CHILDREN = 5
HOLD_LAST = threading.Event()
"""Set by ``hold-last``: the last child waits for ever (until the process is killed)."""


async def parent(ctx: AgentContext) -> str:
    outs = await ctx.gather(*(ctx.spawn("child", f"c{i}") for i in range(CHILDREN)))
    return ",".join(str(o.result) for o in outs)


def child(ctx: AgentContext) -> str:
    if HOLD_LAST.is_set() and ctx.task == f"c{CHILDREN - 1}":
        threading.Event().wait()  # held until the SIGKILL
    return ctx.task.upper()


def main(db: str, out: str) -> int:
    store = SQLiteStore(db)

    def show(event: Event) -> None:
        say(f"{event.kind} {event.agent}")

    agents = {"parent": parent, "child": child}
    with Runtime(agents, store=store, command_poll_s=0, limits=Limits(max_concurrency=1)) as rt:
        rt.subscribe(show)
        handle = spawn_or_attach(rt, store, "parent", "go")
        say("ready")
        outcome = handle.result(timeout=60)
    store.close()
    write_outcome(out, outcome)
    return 0


if __name__ == "__main__":
    if sys.argv[3:] == ["hold-last"]:
        HOLD_LAST.set()
    sys.exit(main(sys.argv[1], sys.argv[2]))
