"""A ping-pong of function agents by run id on a SQLite store, for test_direct_mail_crash:
every mail goes straight from run to run (actors/mail_desk.py), recorded by its sender.

Usage: mail_crash_job.py DB OUT [LINGER_S [HOLD_AT]]. Starts the job, or, when the store
already holds it, takes it up (restore + attach) and waits for its outcome; writes {"status",
"result"} to OUT. LINGER_S: how long the supervisor's group nobody waits on may stay open
(actors/group_linger.py; a long one keeps the record of every mail uncommitted until the
kill). HOLD_AT: the round after which the pinger holds until it is killed (see ``HOLD_AT``).
"""

from __future__ import annotations

import sys
import threading

from job_kit import run_root, say

from subagents.actors import group_linger
from subagents.behaviour.function import AgentContext
from subagents.messages import Mail
from subagents.store.opening import open_location

ROUNDS = 100

HOLD_AT: int | None = None
"""The round after whose line the pinger holds, in that handling, until the test kills the
job: the pong it just read then stays unread in the store whatever the supervisor commits
meanwhile (a handling's read receipt is sent when it ends, ``actors/held_reports.py``).
Without it the kill had to land within the few ms the remaining rounds take: a test
process descheduled that long on a loaded machine found the job ended and every receipt
committed."""


async def ponger(ctx: AgentContext) -> str:
    for _ in range(ROUNDS):
        mail: Mail | None = await ctx.receive(timeout=60)
        assert mail is not None
        ctx.send(mail.sender, f"pong {mail.content}")
    return "ponged"


async def pinger(ctx: AgentContext) -> str:
    got: list[str] = []
    for i in range(ROUNDS):
        ctx.send(ctx.task, f"ping {i}")
        mail: Mail | None = await ctx.receive(timeout=60)
        assert mail is not None
        got.append(mail.content)
        say(f"round {i}")  # the crash test kills at a round it picks
        if i == HOLD_AT:
            threading.Event().wait()  # (until SIGKILL)
    return ",".join(got)


async def root(ctx: AgentContext) -> str:
    ponger_id: str = await ctx.spawn("ponger", "pong", background=True)
    out = await ctx.spawn("pinger", ponger_id)
    # ``ponger``'s end (its ``[background result]`` mail) is awaited too: a root that ended
    # first would cancel a resumed ``ponger`` still replaying its last round
    await ctx.receive(timeout=60)
    return str(out.result)


AGENTS = {"root": root, "pinger": pinger, "ponger": ponger}


def main(db: str, out: str, linger_s: str | None = None, hold_at: str | None = None) -> int:
    global HOLD_AT
    if linger_s is not None:
        group_linger.LINGER_S = float(linger_s)
    if hold_at is not None:
        HOLD_AT = int(hold_at)
    store = open_location(db)  # a SQLite file's path, or a PostgreSQL database's URL
    return run_root(AGENTS, store, out)


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
