"""An LLM run whose model turn the supervisor does not answer in time, and which mails in
that turn, for test_llm_replier_crash.

Usage: llm_stalled_job.py DB OUT. Writes {"status", "result"} to OUT. ``root`` spawns
``talker`` (a model) with its own run id as the task, and returns the first mail it gets.
``talker``'s one turn mails "hello" to the root (``send_message``: straight, if it may) and
calls ``said`` (a read-only tool of the job's: it prints ``said``, after the turn's mail
went, since a tool's call first sends what the turn reported).

The first run (the store holds no run yet) stalls the supervisor: an event subscriber (run on
the supervisor's thread) waits, until the job is killed, once ``talker``'s start is
published, and a run waits 1 s for the answer to an ask (``agent.ASK_TIMEOUT_S``). So
``talker``'s step (the turn that decides "hello") is asked and never answered; the run goes
on, and the test kills the job at ``said``. The run after the kill stalls nothing.

The model is the offline scripted one, with new tool-use ids on every call
(``fresh_ids``), as a real model's are: a turn the crash lost is taken again under new ids,
so a mail it had sent is not found by its call's id (the script's own ids, the same on every
call, would hide a lost turn).
"""

from __future__ import annotations

import sys
import threading

from job_kit import say, spawn_or_attach, write_outcome

from subagents.actors import agent
from subagents.behaviour.function import AgentContext, FunctionAgent
from subagents.definitions.spec import AgentSpec
from subagents.messages import Event, EventKind, Mail
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime
from subagents.store.sqlite import SQLiteStore
from subagents.tools.base import Tool

HOLD_S = 120.0
"""How long the first run stalls the supervisor (the test kills it long before)."""

NEVER = threading.Event()
"""What the stalled supervisor waits for in the first run: never set (the job is killed)."""

FIRST_RUN = True
"""Whether this is the first run (the supervisor stalled), not the run after the kill."""


def said() -> str:
    """Say that this turn's mail has gone."""
    say("said")  # the test kills the first run here
    if FIRST_RUN:  # and the run goes no further before the kill
        NEVER.wait(HOLD_S)
    return "said"


TALKER = AgentSpec(
    name="talker",
    description="Says hello.",
    prompt="You say hello to the run named in your task.",
    tools=("send_message", "said"),
)
SCRIPT = [
    {
        "tool_calls": [
            {"name": "send_message", "input": {"to": "{task}", "content": "hello"}},
            {"name": "said", "input": {}},
        ]
    },
    {"text": "said hello"},
]


async def root(ctx: AgentContext) -> str:
    await ctx.spawn("talker", ctx.run_id, background=True)
    hello: Mail | None = await ctx.receive(timeout=60)
    # the talker's end (its ``[background result]`` mail) is awaited too: a root that ended
    # first would cancel it
    await ctx.receive(timeout=60)
    return hello.content if hello is not None else "nothing"


def stall(event: Event) -> None:
    """On the supervisor's thread: in the first run, stall it once the talker started."""
    if FIRST_RUN and event.kind is EventKind.STARTED and event.agent == "talker":
        NEVER.wait(HOLD_S)


def main(db: str, out: str) -> int:
    global FIRST_RUN
    store = SQLiteStore(db)
    FIRST_RUN = not store.list_runs()
    if FIRST_RUN:
        agent.ASK_TIMEOUT_S = 1.0
    model = ScriptedModel({"talker": SCRIPT}, fresh_ids=True)  # a new take, new ids
    agents = [FunctionAgent.create("root", root), TALKER]
    tools = [Tool.from_function(said, read_only=True)]
    with Runtime(agents, model=model, tools=tools, store=store, command_poll_s=0) as rt:
        rt.subscribe(stall)
        handle = spawn_or_attach(rt, store, "root", "go")
        outcome = handle.result(timeout=120)
    store.close()
    write_outcome(out, outcome)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
