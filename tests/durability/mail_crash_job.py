"""A ping-pong of function agents by run id on a SQLite store, for test_direct_mail_crash:
every mail goes straight from run to run (actors/mail_desk.py), recorded by its sender.

Usage: mail_crash_job.py DB OUT [LINGER_S]. Starts the job, or, when the store already holds
it, takes it up (restore + attach) and waits for its outcome; writes {"status", "result"} to
OUT. LINGER_S: how long the supervisor's group nobody waits on may stay open
(actors/group_linger.py; a long one keeps the record of every mail uncommitted until the
kill).
"""

from __future__ import annotations

import sys

from job_kit import run_root, say

from subagents.actors import group_linger
from subagents.behaviour.function import AgentContext
from subagents.messages import Mail
from subagents.store.opening import open_location

ROUNDS = 100


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
    return ",".join(got)


async def root(ctx: AgentContext) -> str:
    ponger_id: str = await ctx.spawn("ponger", "pong", background=True)
    out = await ctx.spawn("pinger", ponger_id)
    # ``ponger``'s end (its ``[background result]`` mail) is awaited too: a root that ended
    # first would cancel a resumed ``ponger`` still replaying its last round
    await ctx.receive(timeout=60)
    return str(out.result)


AGENTS = {"root": root, "pinger": pinger, "ponger": ponger}


def main(db: str, out: str, linger_s: str | None = None) -> int:
    if linger_s is not None:
        group_linger.LINGER_S = float(linger_s)
    store = open_location(db)  # a SQLite file's path, or a PostgreSQL database's URL
    return run_root(AGENTS, store, out)


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
