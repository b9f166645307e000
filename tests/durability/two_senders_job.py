"""Two senders racing to one function agent, for test_two_senders_crash: mail committed in
one order and handed over in the other (actors/mail_desk.py, on a SQLite store each mail is
its sender's own commit, then handed to its recipient).

Usage: two_senders_job.py DB OUT [LINGER_S [MODE]]. Writes {"status", "result"} to OUT.
MODE ``lost``: in the first run, the record of "re B" commits and then raises, as a cluster
node's record whose answer from the driver was lost does (actors/remote.py
``NodeRuns._record``): the sender then sends it by the supervisor under the same mail id,
and the journal entries it carried are written a second time, by the supervisor. MODE
``failed``: that record raises before anything is written (a full disk, a lock held too
long): the supervisor must write the entries it would have carried.

The first run (the store holds no run yet) forces the race with real synchronization:

- ``first`` sends "A" straight to ``replier``: its own commit; then the job's store
  (``HeldStore``) holds ``first``'s thread, before it hands A over, until the job is killed;
- ``second`` waits until A is committed, then sends "B" straight: committed after A, but
  handed over first (A never is, in this run);
- ``replier`` receives B (the first mail it is handed), answers it straight ("re B": its own
  commit), and prints ``replied``: the test kills the job there, with the supervisor's group
  lingering (LINGER_S, minutes): the receive's journal entry and B's read receipt, told to
  the supervisor, are in that group.

The run after the kill holds nothing. ``replier`` must replay what it did: it received B and
answered it, so it answers A next and returns "B,A" (it must not receive A first because A
was committed first, find "re B" under its reply's key and answer B again later).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence
from typing import Any

from job_kit import run_root, say

from subagents.actors import group_linger
from subagents.behaviour.function import AgentContext
from subagents.blocking import blocking
from subagents.messages import Mail
from subagents.store.sqlite import SQLiteStore

HOLD_S = 120.0
"""How long the first run holds a sender (the test kills it long before)."""

A_COMMITTED = threading.Event()
"""``first``'s mail is committed (set by ``HeldStore``)."""

NEVER = threading.Event()
"""What a held sender waits for in the first run: never set (the job is killed)."""

FIRST_RUN = True
"""Whether this is the first run (the race forced), not the run after the kill."""

MODE = ""
"""How the first run's record of "re B" goes: "" (as any), "lost" or "failed"."""


class HeldStore(SQLiteStore):
    """A SQLite store that, in the first run, holds the sender of "A" after its mail is
    committed and before it is handed over (the mail desk commits, then delivers)."""

    def save_mails_fenced(self, mails: Sequence[Mail], *args: Any, **kwargs: Any) -> None:
        answer = FIRST_RUN and any(m.content == "re B" for m in mails)
        if answer and MODE == "failed":
            raise RuntimeError("the record failed (nothing was written)")
        super().save_mails_fenced(mails, *args, **kwargs)
        if answer and MODE == "lost":
            raise RuntimeError("the record's answer was lost (it was committed)")
        if FIRST_RUN and any(m.content == "A" for m in mails):
            A_COMMITTED.set()
            with blocking():
                NEVER.wait(HOLD_S)


async def replier(ctx: AgentContext) -> str:
    got: list[str] = []
    for _ in range(2):
        mail: Mail | None = await ctx.receive(timeout=60)
        assert mail is not None
        await ctx.send(mail.sender, f"re {mail.content}")  # straight: its own commit
        got.append(mail.content)
        say("replied")  # the test kills the first run at the first
    return ",".join(got)


async def first(ctx: AgentContext) -> str:
    await ctx.send(ctx.task, "A")
    answer: Mail | None = await ctx.receive(timeout=60)
    return answer.content if answer is not None else "no answer"


async def second(ctx: AgentContext) -> str:
    if FIRST_RUN:
        with blocking():
            A_COMMITTED.wait(HOLD_S)
    await ctx.send(ctx.task, "B")
    if FIRST_RUN:  # not a word more to the supervisor before the kill
        with blocking():
            NEVER.wait(HOLD_S)
    answer: Mail | None = await ctx.receive(timeout=60)
    return answer.content if answer is not None else "no answer"


async def root(ctx: AgentContext) -> str:
    replier_id: str = await ctx.spawn("replier", "reply", background=True)
    firsts = ctx.spawn("first", replier_id)
    seconds = ctx.spawn("second", replier_id)
    answers = await ctx.gather(firsts, seconds)
    # the replier's end (its ``[background result]`` mail) is awaited too: a root that ended
    # first would cancel it
    await ctx.receive(timeout=60)
    return f"{answers[0].result}|{answers[1].result}"


AGENTS = {"root": root, "replier": replier, "first": first, "second": second}


def main(db: str, out: str, linger_s: str | None = None, mode: str | None = None) -> int:
    global FIRST_RUN, MODE
    MODE = mode or ""
    if linger_s is not None:
        group_linger.LINGER_S = float(linger_s)
    store = HeldStore(db)
    FIRST_RUN = not store.list_runs()
    return run_root(AGENTS, store, out, timeout=120)


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
