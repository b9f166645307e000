"""Where a run is, asked without waiting for it: the ``subagent_status`` tool of a model,
``ctx.status`` of a function agent, ``Runtime.status`` of the outside; and who may ask.

Every test runs real actors on real threads on the offline model; the runs asked about are
held where the test wants them by gates (events), never by sleeps.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import msgspec
import pytest

from subagents.behaviour.function import AgentContext, FunctionAgent
from subagents.behaviour.status_tool import STATUS
from subagents.behaviour.tools import SEND, SPAWN
from subagents.messages import EventKind, RunProgress, RunStatus
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime
from subagents.store.sqlite import SQLiteStore

from .conftest import WAIT, Events, spec

pytestmark = pytest.mark.usefixtures("no_new_threads")

ENDS = (EventKind.COMPLETED, EventKind.CANCELLED, EventKind.FAILED)


class Gates:
    """The worker's tool holds it until ``release``; the lead's ``wait_worker`` tool waits
    until the worker is inside its tool and answers the worker's run id."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.worker_run: list[str] = []

    def lookup(self, key: str) -> str:
        """Look a key up (holds until the test releases it)."""
        self.entered.set()
        self.release.wait(WAIT)
        return f"{key}=value"

    def wait_worker(self) -> str:
        """Wait until the worker is looking something up; its run id."""
        assert self.entered.wait(WAIT)
        return self.worker_run[0]


def test_a_model_asks_where_its_background_child_is() -> None:
    gates = Gates()
    model = ScriptedModel(
        {
            "lead": [
                {"tool_calls": [{"name": SPAWN, "input": {"agent": "worker", "task": "dig",
                                                           "background": True}}]},
                {"tool_calls": [{"name": "wait_worker", "input": {}}]},
                {"tool_calls": [{"name": SEND, "input": {"to": "{result0}", "content": "hi"}},
                                {"name": STATUS, "input": {"run_id": "{result0}"}}]},
                {"text": "{results}"},
            ],
            "worker": [
                {"text": "looking", "tool_calls": [{"name": "lookup", "input": {"key": "k"}}]}
            ],
        }
    )  # fmt: skip
    events = Events()
    agents = [spec("lead"), spec("worker")]
    with Runtime(agents, model=model, tools=[gates.lookup, gates.wait_worker]) as rt:
        rt.subscribe(events)
        rt.subscribe(
            lambda e: (
                gates.worker_run.append(e.run_id)
                if e.kind is EventKind.SPAWNED and e.agent == "worker"
                else None
            )
        )
        try:
            outcome = rt.run("lead", "the job", wait=WAIT)
        finally:
            gates.release.set()
        # the worker (cancelled with its parent) is out of its tool before the runtime closes
        events.wait_for(lambda seen: any(e.agent == "worker" and e.kind in ENDS for e in seen))
    assert outcome.status is RunStatus.COMPLETED, outcome
    assert outcome.result is not None
    answered = [part for part in outcome.result.split("\n") if '"run_id"' in part]
    progress = msgspec.json.decode(answered[-1], type=RunProgress)
    assert progress.run_id == gates.worker_run[0]
    assert progress.agent == "worker"
    assert progress.status in (RunStatus.RUNNING, RunStatus.WAITING)
    assert progress.steps == 1  # its first model step is recorded; it is in its tool
    assert progress.last_tool == "lookup" and progress.last_tool_input == {"key": "k"}
    assert progress.usage.output_tokens > 0 and progress.usage.model_calls == 1
    assert progress.unread_mail == 1  # the lead's "hi", sent in the same turn
    assert progress.result is None and progress.ended_at is None


def test_a_run_may_not_ask_about_another_tree() -> None:
    hold = threading.Event()

    async def other(ctx: AgentContext) -> str:
        await ctx.sleep(0)
        hold.wait(WAIT)
        return "other done"

    model = ScriptedModel(
        {"lead": [{"tool_calls": [{"name": STATUS, "input": {"run_id": "{task}"}}]},
                  {"text": "{results}"}]}
    )  # fmt: skip
    with Runtime([spec("lead"), FunctionAgent.create("other", other)], model=model) as rt:
        try:
            elsewhere = rt.spawn("other", "stay")
            outcome = rt.run("lead", elsewhere.run_id, wait=WAIT)
            nowhere = rt.run("lead", "r-no-such-run", wait=WAIT)
            # the outside may ask about any run
            assert rt.status(elsewhere.run_id).agent == "other"
            with pytest.raises(LookupError, match="no run 'r-no-such-run'"):
                rt.status("r-no-such-run")
        finally:
            hold.set()
    assert outcome.result is not None and nowhere.result is not None
    assert "a run can only ask about runs of its own tree" in outcome.result
    assert '"run_id"' not in outcome.result  # nothing of the other run was shown
    assert "a run can only ask about runs of its own tree" in nowhere.result


def test_a_function_agent_asks_with_ctx_status() -> None:
    release = threading.Event()
    seen: dict[str, Any] = {}

    async def worker(ctx: AgentContext) -> str:
        await ctx.sleep(0)
        release.wait(WAIT)
        return "worked"

    async def lead(ctx: AgentContext) -> str:
        child: str = await ctx.spawn("worker", "work", background=True)
        seen["child"] = ctx.status(child)
        seen["self"] = ctx.status(ctx.run_id)
        with pytest.raises(ValueError, match="no such run in this tree"):
            ctx.status("r-missing")
        release.set()
        return "asked"

    agents = [FunctionAgent.create("lead", lead), FunctionAgent.create("worker", worker)]
    with Runtime(agents, model=ScriptedModel()) as rt:
        try:
            outcome = rt.run("lead", "go", wait=WAIT)
        finally:
            release.set()
    assert outcome.status is RunStatus.COMPLETED, outcome
    child, itself = seen["child"], seen["self"]
    assert isinstance(child, RunProgress) and child.agent == "worker"
    assert child.status in (RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.WAITING)
    assert itself.agent == "lead" and itself.status in (RunStatus.RUNNING, RunStatus.WAITING)


def test_the_outside_sees_what_a_model_is_writing(tmp_path: Path) -> None:
    model = ScriptedModel(
        {"writer": [{"text": "first half|second half", "stream": 2, "delay": WAIT}]}
    )
    events = Events()
    store = SQLiteStore(tmp_path / "runs.sqlite3")
    with Runtime([spec("writer")], model=model, store=store) as rt:
        rt.subscribe(events)
        handle = rt.spawn("writer", "write")
        events.wait_for(lambda seen: any(e.kind is EventKind.TEXT_DELTA for e in seen))
        progress = rt.status(handle.run_id)
        kept = store.previews([handle.run_id])  # committed before the event was published
        rt.stop(handle.run_id)
        # stopped in the middle of its model call: its preview goes with its end
        assert store.previews([handle.run_id]) == {}
    store.close()
    assert kept[handle.run_id].text == "first half|"
    assert progress.writing == "first half|"
    assert progress.status is RunStatus.RUNNING and progress.steps == 0
    delta = events.of(EventKind.TEXT_DELTA)[0]
    assert delta.data["parts"] == [{"kind": "text", "text": "first half|"}]


def test_the_last_words_a_model_streams_reach_the_outside_before_its_run_completes(
    tmp_path: Path,
) -> None:
    """The last ``Streamed`` report of a run's last model call is told to the supervisor
    straight, and its step and end go after it, through the line of the agents' reports
    (SQLite: ``actors/group_linger.py``). Here they are all waiting when the supervisor
    comes to them (its thread held by an event subscriber until the run's actor is done).
    The end must not be decided first: a ``Streamed`` from a run that ended is dropped,
    so the outside never saw the last words the model wrote."""
    model = ScriptedModel({"writer": [{"text": "first half|second half", "stream": 2}]})
    held, release = threading.Event(), threading.Event()

    def hold(event: Any) -> None:  # on the supervisor's thread
        if event.kind is EventKind.STARTED and event.agent == "writer":
            held.set()
            release.wait(WAIT)

    events = Events()
    store = SQLiteStore(tmp_path / "runs.sqlite3")
    with Runtime([spec("writer")], model=model, store=store) as rt:
        rt.subscribe(hold)
        rt.subscribe(events)
        handle = rt.spawn("writer", "write")
        assert held.wait(WAIT)
        try:
            assert rt._hosting.agents_idle(WAIT)  # its deltas, step and end are on their way
        finally:
            release.set()
        assert handle.result(WAIT).status is RunStatus.COMPLETED
        events.wait_count(EventKind.COMPLETED, "writer", 1)
    store.close()
    written = "".join(
        part["text"] for e in events.of(EventKind.TEXT_DELTA) for part in e.data["parts"]
    )
    assert written == "first half|second half"
