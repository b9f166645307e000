"""A subscriber on a SQLite store, in two processes, for test_topics_crash.

Usage: topics_job.py DB OUT MODE. ``start``: ``hub`` spawns ``listener`` (a model) in the
background, which subscribes to ``news`` and says so; the hub then writes its run id to OUT
and waits for word from the outside (the test kills the process there). ``resume``: takes up
what the killed job left (``Runtime(restore=True)``), tells the hub "go": it publishes to
``topic:news`` and returns what the listener made of it, written to OUT + ".outcome".
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import msgspec

from subagents.behaviour.function import AgentContext, FunctionAgent
from subagents.definitions.spec import AgentSpec
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime
from subagents.store.sqlite import SQLiteStore


async def hub(ctx: AgentContext) -> str:
    await ctx.spawn("listener", "follow the news", background=True)
    on = await ctx.receive(timeout=120)
    assert on is not None and on.content == "on", on
    aside = Path(ctx.task + ".tmp")  # written aside and renamed: the test's kill may come
    aside.write_text(ctx.run_id)  # between a file's creation and its write
    aside.replace(ctx.task)  # (again on the replay: the same id)
    go = await ctx.receive(timeout=600)
    assert go is not None and go.content == "go", go
    await ctx.send("topic:news", "hello")
    done = await ctx.receive(timeout=30)
    return done.content if done is not None else "the listener never answered"


LISTENER = AgentSpec(
    name="listener",
    description="Listens to the news.",
    tools=("subscribe", "send_message", "wait_for_message"),
)
SCRIPT = [
    {"tool_calls": [{"name": "subscribe", "input": {"topic": "news"}}]},
    {"tool_calls": [{"name": "send_message", "input": {"to": "hub", "content": "on"}}]},
    {"tool_calls": [{"name": "wait_for_message", "input": {"timeout": 300}}]},
    {"text": "listener heard: {mail_content}"},
]


def main(db: str, out: str, mode: str) -> int:
    store = SQLiteStore(db)
    agents = [FunctionAgent.create("hub", hub), LISTENER]
    model = ScriptedModel({"listener": SCRIPT}, fresh_ids=True)
    if mode == "start":
        rt = Runtime(agents, model=model, store=store, command_poll_s=0)  # type: ignore[arg-type]
        rt.spawn("hub", out)
        threading.Event().wait(600)  # killed here, the hub waiting for word
        return 1
    hub_id = Path(out).read_text()
    with Runtime(agents, model=model, store=store, restore=True, command_poll_s=0) as rt:  # type: ignore[arg-type]
        rt.send(hub_id, "go")
        done = rt.wait_any([hub_id], timeout=60)
        Path(out + ".outcome").write_bytes(
            msgspec.json.encode({"status": done.status, "result": done.result})
        )
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
