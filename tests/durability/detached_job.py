"""A detached child on a SQLite store, in two processes, for test_detached_crash.

Usage: detached_job.py DB OUT MODE. ``start``: ``lead`` spawns ``slow`` detached and
completes; once ``slow`` waits for its mail, the job writes the ids (JSON) to OUT and hangs
(the test kills it there). ``resume``: takes up what the killed job left
(``Runtime(restore=True)``), mails ``slow`` "wake", waits for it, writes its outcome to OUT.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import msgspec

from subagents.behaviour.function import AgentContext
from subagents.messages import Event, EventKind
from subagents.runtime import Runtime
from subagents.store.sqlite import SQLiteStore


async def lead(ctx: AgentContext) -> str:
    slow_id: str = await ctx.spawn("slow", "wait for word", detach=True)
    return slow_id


async def slow(ctx: AgentContext) -> str:
    mail = await ctx.receive(timeout=600)
    return f"slow got: {mail.content if mail is not None else None}"


def main(db: str, out: str, mode: str) -> int:
    store = SQLiteStore(db)
    if mode == "start":
        waiting = threading.Event()

        def seen(event: Event) -> None:
            if (event.kind, event.agent) == (EventKind.WAITING, "slow"):
                waiting.set()

        rt = Runtime([lead, slow], store=store, command_poll_s=0)
        rt.subscribe(seen)
        outcome = rt.run("lead", "start it", wait=60)
        assert waiting.wait(60), "slow never waited"
        ids = {"lead": outcome.run_id, "slow": outcome.result}
        part = Path(f"{out}.part")  # whole or not at all: the test reads it once it exists,
        part.write_bytes(msgspec.json.encode(ids))  # and kills this job (seen: half a file)
        part.replace(out)
        threading.Event().wait(600)  # killed here, the detached child waiting for its mail
        return 1
    ids = msgspec.json.decode(Path(out).read_bytes())
    with Runtime([lead, slow], store=store, restore=True, command_poll_s=0) as rt:
        rt.send(ids["slow"], "wake")
        done = rt.wait_any([ids["slow"]], timeout=60)
        Path(out + ".outcome").write_bytes(
            msgspec.json.encode({"status": done.status, "result": done.result})
        )
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
