"""Once the supervisor has decided a start is over, that start runs no side-effecting tool.

An LLM parent whose ``fail_parent`` child fails is restarted (after a backoff, here long)
while its first start is inside a tool call (held by the test). When that call returns, the
old start goes on to its next call, which would write a file: it must not. Two guards stop
it, either enough: the restart's decision stops the old actor (``StopAgent``: its cancel
flag, checked after the journal's ask), and the supervisor refuses the journal's ask of a
start that is over (``SupervisorCore.tool_starting``'s reply; the one guard where no stop
reaches the actor: tests/supervision/test_stale_tool_starts.py).

Held with events, not sleeps: the child fails only once the parent is inside its held call,
the held call returns only once the restart is decided (its event), and the file is looked
for only once the old start has passed its write (a read-only marker tool after it ran)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from polling import wait_until
from subagents.behaviour.function import AgentContext, FunctionAgent
from subagents.behaviour.tools import SPAWN
from subagents.messages import EventKind, RunFinished
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime
from subagents.store.sqlite import SQLiteStore
from subagents.tools.base import Tool, ToolContext

from .conftest import WAIT, Events, spec

pytestmark = pytest.mark.usefixtures("no_new_threads")


def test_the_old_start_of_a_restarted_run_writes_nothing_after_the_decision(
    tmp_path: Path,
) -> None:
    target = tmp_path / "written-by-the-old-start.txt"
    holding, release, fail, passed = (threading.Event() for _ in range(4))

    def hold() -> str:
        """Waits until the test lets it go."""
        holding.set()
        assert release.wait(WAIT)
        return "held"

    def scribble(text: str) -> str:
        """Writes a file (a side effect: journaled before it runs)."""
        target.write_text(text)
        return "written"

    def marker() -> str:
        """Says the old start got past its write."""
        passed.set()
        return "marked"

    async def doomed(ctx: AgentContext) -> str:
        assert fail.wait(WAIT)
        raise RuntimeError("the child failed")

    tools = [
        Tool.from_function(hold, read_only=True),
        Tool.from_function(scribble),
        Tool.from_function(marker, read_only=True),
    ]
    spawn: dict[str, Any] = {
        "name": SPAWN,
        "input": {
            "agent": "doomed",
            "task": "fail",
            "background": True,
            "on_failure": "fail_parent",
        },
    }
    model = ScriptedModel(
        {
            "lead": [
                {
                    "tool_calls": [
                        spawn,
                        {"name": "hold", "input": {}},
                        {"name": "scribble", "input": {"text": "after the restart"}},
                        {"name": "marker", "input": {}},
                    ]
                },
                "the next start's answer",
            ]
        }
    )
    agents = [
        spec("lead", restart="transient", restart_backoff=600.0, restart_backoff_max=600.0),
        FunctionAgent.create("doomed", doomed),
    ]
    events = Events()
    store = SQLiteStore(tmp_path / "runs.db")
    try:
        with Runtime(agents, model=model, store=store, tools=tools) as rt:
            rt.subscribe(events)
            lead = rt.spawn("lead", "work")
            assert holding.wait(WAIT)  # the old start is inside its held call
            fail.set()  # its child fails: the lead is restarted (its backoff begins)
            events.wait_for(
                lambda seen: any(
                    e.kind is EventKind.RESTARTED and e.run_id == lead.run_id for e in seen
                )
            )
            release.set()  # the old start goes on: its next call would write
            assert passed.wait(WAIT)  # it got past that call
            assert not target.exists()  # and wrote nothing
            # the old start took no slot of the new one: nothing of it was recorded
            record = rt.get(lead.run_id)
            assert record is not None and record.tool_calls == 2  # spawn and hold
    finally:
        fail.set()
        release.set()
        store.close()


def test_a_refused_tool_start_cancels_its_start_where_no_stop_reaches_it(tmp_path: Path) -> None:
    """The supervisor takes the lead's start for over while its actor lives on and gets no
    stop: as for a Ray run moved off a node taken for lost (``host_lost``), here its end told
    to the supervisor by the test (``RunFinished``: the effector forgets the start, it does
    not stop it). The refusal of its next side-effecting call then cancels the start itself
    (its cancel flag, as a stop would set it): the call after it sees the start cancelled,
    and so would its next model step (``LLMBehaviour._step``). Without it that flag stayed
    clear and the old start went on spending."""
    target = tmp_path / "written-by-the-old-start.txt"
    holding, release, passed = (threading.Event() for _ in range(3))
    seen: list[bool] = []

    def hold() -> str:
        """Waits until the test lets it go."""
        holding.set()
        assert release.wait(WAIT)
        return "held"

    def scribble(text: str) -> str:
        """Writes a file (a side effect: journaled before it runs)."""
        target.write_text(text)
        return "written"

    def marker(ctx: ToolContext) -> str:
        """Says whether the start is cancelled, once past the write."""
        seen.append(ctx.cancel.is_set())
        passed.set()
        return "marked"

    tools = [
        Tool.from_function(hold, read_only=True),
        Tool.from_function(scribble),
        Tool.from_function(marker, read_only=True),
    ]
    calls = [
        {"name": "hold", "input": {}},
        {"name": "scribble", "input": {"text": "after its end"}},
        {"name": "marker", "input": {}},
    ]
    model = ScriptedModel({"lead": [{"tool_calls": calls}, "a step it must not take"]})
    store = SQLiteStore(tmp_path / "runs.db")
    try:
        with Runtime([spec("lead")], model=model, store=store, tools=tools) as rt:
            lead = rt.spawn("lead", "work")
            assert holding.wait(WAIT)  # the start is inside its held call
            agents = rt._hosting.dispatcher
            assert agents is not None and agents.live == 1  # the lead's start, on its actor
            ended = RunFinished(run_id=lead.run_id, result="taken over", attempt=1)
            rt._supervisor.tell(ended)
            assert lead.result(WAIT).result == "taken over"  # the supervisor: that start is over
            release.set()  # the start goes on: its next call is refused
            assert passed.wait(WAIT)
            assert not target.exists()
            assert seen == [True]  # the refusal cancelled the start
            # and it ended as a stopped start does: its actor stopped, while the runtime
            # is open (without it, the actor lived on, idle, until the runtime closed)
            wait_until(lambda: agents.live == 0, "the refused start's actor stopped", WAIT)
    finally:
        release.set()
        store.close()
