"""A function agent that sends what it observed, for test_observed_send_crash.

``looker`` looks at its mailbox, or receives with a timeout of 0 (an observation:
journaled with what it saw), then sends
what it saw straight to ``echo`` (recorded by its own thread, SQLite), which answers
"hello" and prints ``replied``. The crash test kills the job there, with the supervisor's
group lingering for minutes (actors/group_linger.py): the mail "saw 0" is committed, the
journal entry of the look that decided it maybe not. A resumed ``looker`` must go on from
what it saw, not look again (it would now see "hello" and send "saw 1" under the same key).
When LINGER_S is given (the run to be killed), ``echo`` holds after ``replied`` until the kill,
so the job cannot finish before the test's SIGKILL lands, however late a loaded machine
delivers it.

Usage: observed_send_job.py DB OUT LOOK [LINGER_S] (LOOK: ``mailbox`` or ``timeout``);
writes {"status", "result"} to OUT.
"""

from __future__ import annotations

import sys
import threading

from job_kit import run_root, say

from subagents.actors import group_linger
from subagents.behaviour.function import AgentContext
from subagents.messages import Mail
from subagents.store.opening import open_location


async def echo(ctx: AgentContext) -> str:
    first: Mail | None = await ctx.receive(timeout=60)
    assert first is not None
    await ctx.send(first.sender, "hello")
    say("replied")  # the crash test kills here
    if HOLD_ECHO.is_set():
        threading.Event().wait()  # held until the SIGKILL
    return first.content


async def looker(ctx: AgentContext) -> str:
    if LOOK == "timeout":  # a receive that timed out: nothing had come
        first: Mail | None = await ctx.receive(timeout=0)
        box = [] if first is None else [first]
    else:
        box = ctx.mailbox()
    await ctx.send(ctx.task, f"saw {len(box)}")
    got: Mail | None = await ctx.receive(timeout=60)
    return f"saw {len(box)}, got {got.content if got is not None else None}"


async def root(ctx: AgentContext) -> str:
    echo_id: str = await ctx.spawn("echo", "echo", background=True)
    out = await ctx.spawn("looker", echo_id)
    # ``echo``'s end (its ``[background result]`` mail) is awaited too: a root that ended first
    # would cancel a resumed ``echo`` still replaying (a fresh-clone CI run saw it cancelled)
    await ctx.receive(timeout=60)
    return str(out.result)


LOOK = "mailbox"
"""How ``looker`` looks: ``mailbox`` (``ctx.mailbox()``) or ``timeout`` (``receive(0)``)."""

HOLD_ECHO = threading.Event()
"""Set with LINGER_S (the run the test kills): ``echo`` waits for ever after ``replied``."""

AGENTS = {"root": root, "looker": looker, "echo": echo}


def main(db: str, out: str, look: str, linger_s: str | None = None) -> int:
    global LOOK
    LOOK = look
    if linger_s is not None:
        group_linger.LINGER_S = float(linger_s)
        HOLD_ECHO.set()
    store = open_location(db)
    return run_root(AGENTS, store, out)


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
