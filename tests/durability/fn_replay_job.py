"""A function agent's job for test_function_replay, killed (SIGKILL) and taken up again.

The boss receives mail from a child, stops another child, sleeps, gathers two workers and
reads its mailbox; it returns a dict (a typed value). Usage: fn_replay_job.py DB OUT
[hold-workers]. Starts
the job, or takes it up when the store already holds it (restore + attach), prints
``ready`` and then one ``<event> <agent>`` line per event, and writes the outcome to OUT as
JSON: {"status", "result", "value", "typed"}. ``hold-workers``: the workers never end (the
run to be killed after a worker started), so the job cannot finish before the test's SIGKILL
lands, however late a loaded machine delivers it.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

import msgspec
from job_kit import say, spawn_or_attach

from subagents import Runtime, SQLiteStore
from subagents.behaviour.function import AgentContext
from subagents.messages import Event

HOLD_WORKERS = threading.Event()
"""Set by ``hold-workers``: each worker waits for ever (until the process is killed), before
its sleep, so the run taken up after the kill does what an unkilled one does."""


async def pinger(ctx: AgentContext) -> str:
    await ctx.send(ctx.parent_run_id or "", "token-7")
    return "pinged"


async def sleeper(ctx: AgentContext) -> str:
    await ctx.receive(timeout=60)
    return "woke"


async def worker(ctx: AgentContext) -> dict[str, float]:
    if HOLD_WORKERS.is_set():
        threading.Event().wait()  # held until the SIGKILL
    await ctx.sleep(float(ctx.task))
    return {"slept": float(ctx.task)}


async def boss(ctx: AgentContext) -> dict[str, Any]:
    await ctx.spawn("pinger", "ping me", background=True)
    mail = await ctx.receive(timeout=30)
    if mail is None:
        raise RuntimeError("the pinger's mail never came")
    asleep = await ctx.spawn("sleeper", "wait", background=True)
    stopped = await ctx.stop(asleep)
    await ctx.sleep(0.2)
    done = await ctx.gather(ctx.spawn("worker", "0.3"), ctx.spawn("worker", "0.4"))
    notices = ctx.mailbox()  # the two background children's ends
    return {
        "mail": mail.content,
        "stopped": len(stopped),
        "workers": [o.value for o in done],
        "notices": sorted(m.content.split(" ", 2)[1] for m in notices),
    }


AGENTS = {"boss": boss, "pinger": pinger, "sleeper": sleeper, "worker": worker}


def main(db: str, out: str) -> int:
    store = SQLiteStore(db)

    def show(event: Event) -> None:
        say(f"{event.kind} {event.agent}")

    with Runtime(AGENTS, store=store, command_poll_s=0) as rt:
        rt.subscribe(show)
        handle = spawn_or_attach(rt, store, "boss", "go")
        say("ready")
        outcome = handle.result(timeout=60)
    store.close()
    Path(out).write_bytes(
        msgspec.json.encode(
            {
                "status": str(outcome.status),
                "result": outcome.result,
                "value": outcome.value,
                "typed": outcome.typed,
                "error": outcome.error,
            }
        )
    )
    return 0


if __name__ == "__main__":
    if sys.argv[3:] == ["hold-workers"]:
        HOLD_WORKERS.set()
    sys.exit(main(sys.argv[1], sys.argv[2]))
