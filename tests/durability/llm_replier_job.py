"""Two senders racing to one LLM run that reads its mail and answers it straight, for
test_llm_replier_crash (the model's twin of two_senders_job.py).

Usage: llm_replier_job.py DB OUT [LINGER_S [MODE]]. Writes {"status", "result"} to OUT.
Prints ``replied`` each time an answer ("re ...") is committed: the test kills the job there.

``replier`` is a model (the offline ``ScriptedModel``, ``SCRIPT``): it takes its first mail
as a tool result (``wait_for_message``), answers it with ``send_message`` (straight to its
sender: its own commit), takes the next one shown between turns (in its next model call's
message), answers it the same way, and ends.

The first run (the store holds no run yet) forces the order with real synchronization:

- ``first`` waits until ``replier`` has taken its first turn (its ``ready`` tool: a run
  not started yet is sent its mail by the supervisor, not straight; under load ``first``
  could send before), then sends "A" straight to ``replier``: its own commit; then the
  job's store (``HeldStore``) holds ``first``'s thread, before it hands A over, until the
  job is killed;
- ``second`` waits until A is committed and ``replier`` has taken its first turn (its
  ``ready`` tool, called before its wait), then sends "B" straight: committed after A, but
  handed over first (A never is, in this run);
- ``replier``'s wait is answered with B, it answers "re B", and the test kills the job once
  that is committed (its thread held there: ``HOLD_ANSWERS``), the supervisor's group
  lingering (LINGER_S, minutes).

Later runs hold nothing: "A" is unread in the store, and the resumed ``replier`` is shown it
between turns. The test kills the second run once "re A" is committed, and lets a third one
end. In the second run (MODE ``wait-first``), ``replier``'s answer to A waits until
``first`` runs again (its ``hold`` tool, in that turn before the answer): the runs are taken
up in no set order, and an answer to a run not started yet would go by the supervisor, not
straight.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence
from typing import Any

from job_kit import run_root, say

from subagents.actors import group_linger
from subagents.behaviour.function import AgentContext, FunctionAgent
from subagents.blocking import blocking
from subagents.definitions.spec import AgentSpec
from subagents.messages import Mail
from subagents.models.scripted import ScriptedModel
from subagents.store.sqlite import SQLiteStore
from subagents.tools.base import Tool

HOLD_S = 120.0
"""How long the first run holds a thread (the test kills it long before)."""

A_COMMITTED = threading.Event()
"""``first``'s mail is committed (set by ``HeldStore``)."""

READY = threading.Event()
"""``replier`` took its first turn (set by its ``ready`` tool)."""

FIRST_UP = threading.Event()
"""``first`` runs (set as its function starts, or starts again)."""

HOLD_ANSWERS = False
"""Whether the thread that committed an answer is held there (a run the test kills: LINGER_S
given), so that nothing more of the run happens before the kill."""

WAIT_FOR_FIRST = False
"""Whether ``hold`` waits for ``first`` (MODE ``wait-first``)."""

NEVER = threading.Event()
"""What a held thread waits for in the first run: never set (the job is killed)."""

FIRST_RUN = True
"""Whether this is the first run (the order forced), not a run after a kill."""


class HeldStore(SQLiteStore):
    """A SQLite store that says when an answer is committed, and, in the first run, holds
    the sender of "A" after its mail is committed and before it is handed over."""

    def save_mails_fenced(self, mails: Sequence[Mail], *args: Any, **kwargs: Any) -> None:
        super().save_mails_fenced(mails, *args, **kwargs)
        if any(m.content.startswith("re ") for m in mails):
            say("replied")  # the test kills the job here
            if HOLD_ANSWERS:  # and the run goes no further before the kill
                with blocking():
                    NEVER.wait(HOLD_S)
        if FIRST_RUN and any(m.content == "A" for m in mails):
            A_COMMITTED.set()
            with blocking():
                NEVER.wait(HOLD_S)


def ready() -> str:
    """Say that the replier is about to wait for mail."""
    READY.set()
    return "ready"


def hold() -> str:
    """Wait until the run you answer next runs."""
    if WAIT_FOR_FIRST:
        with blocking():
            FIRST_UP.wait(HOLD_S)
    return "held"


REPLIER = AgentSpec(
    name="replier",
    description="Answers its mail.",
    prompt="You answer every mail you get.",
    tools=("ready", "wait_for_message", "send_message", "hold"),
)
REPLY = {"name": "send_message", "input": {"to": "{mail_from}", "content": "re {mail_content}"}}
SCRIPT = [
    # the first mail, as the wait's result (B in the first run)
    {"tool_calls": [{"name": "ready", "input": {}}, {"name": "wait_for_message", "input": {}}]},
    {"tool_calls": [REPLY]},
    # the next one, shown in this turn's message, after the answer's acknowledgement
    {"tool_calls": [{"name": "hold", "input": {}}, REPLY]},
    {"text": "answered"},
]


async def first(ctx: AgentContext) -> str:
    FIRST_UP.set()
    if FIRST_RUN:  # A goes straight only to a started run: the replier, once it took a turn
        with blocking():
            READY.wait(HOLD_S)
    await ctx.send(ctx.task, "A")
    answer: Mail | None = await ctx.receive(timeout=60)
    return answer.content if answer is not None else "no answer"


async def second(ctx: AgentContext) -> str:
    if FIRST_RUN:
        with blocking():
            A_COMMITTED.wait(HOLD_S)
            READY.wait(HOLD_S)
    await ctx.send(ctx.task, "B")
    answer: Mail | None = await ctx.receive(timeout=60)
    return answer.content if answer is not None else "no answer"


async def root(ctx: AgentContext) -> str:
    replier_id: str = await ctx.spawn("replier", "answer your mail", background=True)
    firsts = ctx.spawn("first", replier_id)
    seconds = ctx.spawn("second", replier_id)
    answers = await ctx.gather(firsts, seconds)
    # the replier's end (its ``[background result]`` mail) is awaited too: a root that ended
    # first would cancel it
    await ctx.receive(timeout=60)
    return f"{answers[0].result}|{answers[1].result}"


AGENTS = [
    FunctionAgent.create("root", root),
    FunctionAgent.create("first", first),
    FunctionAgent.create("second", second),
    REPLIER,
]


def main(db: str, out: str, linger_s: str | None = None, mode: str | None = None) -> int:
    global FIRST_RUN, HOLD_ANSWERS, WAIT_FOR_FIRST
    WAIT_FOR_FIRST = mode == "wait-first"
    HOLD_ANSWERS = linger_s is not None
    if linger_s is not None:
        group_linger.LINGER_S = float(linger_s)
    store = HeldStore(db)
    FIRST_RUN = not store.list_runs()
    model = ScriptedModel({"replier": SCRIPT}, fresh_ids=True)  # a lost turn shows
    tools = [Tool.from_function(ready), Tool.from_function(hold, read_only=True)]
    return run_root(AGENTS, store, out, timeout=120, model=model, tools=tools)


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
