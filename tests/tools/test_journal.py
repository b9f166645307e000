"""The tool journal inside one process: a side-effecting call is in the store before it runs,
a read-only or idempotent one is not (it pays no round trip), and the decisions of
``tools.journal`` for a resumed run."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from subagents.actors import agent as agent_actor
from subagents.definitions.spec import AgentSpec
from subagents.messages import Event, EventKind, ModelRequest, ModelResponse, RunStatus
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime
from subagents.store.sqlite import SQLiteStore
from subagents.tools import journal
from subagents.tools.base import Tool
from subagents.tools.builtin import builtin_tools
from subagents.tools.context import ToolContext

from .conftest import WAIT


def test_a_side_effecting_call_is_recorded_before_it_runs(repo: Path, tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    seen: dict[str, bool] = {}

    def journaled_at_call(name: str, ctx: ToolContext) -> str:
        checkpoint = store.load_checkpoint(ctx.run_id)  # what a crash now would find
        seen[name] = checkpoint is not None and ctx.tool_use_id in checkpoint.started
        return name

    def effect(name: str, ctx: ToolContext) -> str:
        """Changes something."""
        return journaled_at_call(name, ctx)

    def lookup(name: str, ctx: ToolContext) -> str:
        """Changes nothing."""
        return journaled_at_call(name, ctx)

    tools = [Tool.from_function(effect), Tool.from_function(lookup, read_only=True)]
    calls = [{"name": "effect", "input": {"name": "e"}}, {"name": "lookup", "input": {"name": "l"}}]
    model = ScriptedModel({"worker": [{"tool_calls": calls}, "done"]})
    spec = AgentSpec(name="worker", description="d", prompt="p")
    try:
        with Runtime([spec], model=model, store=store, tools=tools, workspace=repo) as rt:
            assert rt.run("worker", "go", wait=WAIT).status is RunStatus.COMPLETED
    finally:
        store.close()
    assert seen == {"e": True, "l": False}


def test_resume_decisions() -> None:
    tools = builtin_tools()
    for name in ("Write", "Edit", "MultiEdit", "NotebookEdit", "Bash"):
        assert journal.record_before_run(tools[name]), name
        assert journal.interrupted(tools[name], started=True), name
        assert not journal.interrupted(tools[name], started=False), name
    for name in ("Read", "Grep", "Glob", "LS", "BashOutput", "KillShell"):
        assert not journal.record_before_run(tools[name]), name
        assert not journal.interrupted(tools[name], started=True), name

    def fn() -> str:
        return ""

    assert journal.record_before_run(Tool.from_function(fn))
    assert not journal.record_before_run(Tool.from_function(fn, idempotent=True))
    assert journal.interrupted(None, started=True)  # a tool no longer there: not run blind
    assert "It was not run again" in journal.interrupted_message("Bash")


def test_a_call_whose_start_the_supervisor_did_not_record_in_time_says_so(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A side-effecting call runs only once its start is recorded. When the supervisor does
    not answer in time (stalled: ``agent.ASK_TIMEOUT_S``), the call is not run, and the
    model read "not run: the run is stopping", though its run went on; it reads what
    happened now."""
    monkeypatch.setattr(agent_actor, "ASK_TIMEOUT_S", 1.0)
    ran: list[str] = []
    second_turn, stalled = threading.Event(), threading.Event()

    def effect(name: str) -> str:
        """Changes something."""
        ran.append(name)
        return name

    class Watched(ScriptedModel):
        def complete(self, request: ModelRequest, **kwargs: Any) -> ModelResponse:
            if any(m.role == "assistant" for m in request.messages):
                second_turn.set()  # the call's result is in: the supervisor may go on
            return super().complete(request, **kwargs)

    def stall(event: Event) -> None:
        """On the supervisor's thread: stalls it once, as the worker starts."""
        if event.kind is EventKind.STARTED and not stalled.is_set():
            stalled.set()
            second_turn.wait(WAIT)

    call = {"name": "effect", "input": {"name": "e"}}
    model = Watched({"worker": [{"tool_calls": [call]}, {"text": "saw: {result0}"}]})
    spec = AgentSpec(name="worker", description="d", prompt="p")
    tools = [Tool.from_function(effect)]
    with Runtime([spec], model=model, tools=tools, workspace=repo) as rt:
        rt.subscribe(stall)
        outcome = rt.run("worker", "go", wait=WAIT)
    assert outcome.status is RunStatus.COMPLETED, outcome
    assert ran == []  # not run: its start was not recorded
    assert "did not record its start within 1 s" in (outcome.result or ""), outcome.result
    assert "stopping" not in (outcome.result or "")


def test_a_start_recorded_after_its_ask_timed_out_is_not_kept(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The supervisor stalls while a side-effecting call asks for its start to be recorded:
    the ask times out (``agent.ASK_TIMEOUT_S``), the call is not run and the model is told.
    The ask stays in the supervisor's inbox and is recorded late; its end follows it there.
    Before, the journal kept it as begun (``Checkpoint.started``) while the model was asked
    again: a crash then, and the resumed run read "interrupted, its effects unknown" for a
    call that never ran. (Its answer, told in line, reached the supervisor before the late
    step it answers and was dropped: the end is what keeps the journal true.)"""
    monkeypatch.setattr(agent_actor, "ASK_TIMEOUT_S", 1.0)
    store = SQLiteStore(tmp_path / "runs.db")
    second_turn, stalled = threading.Event(), threading.Event()
    seen: list[tuple[str, ...]] = []
    asked: list[Runtime] = []

    def effect(name: str) -> str:
        """Changes something."""
        return name

    class Watched(ScriptedModel):
        def complete(self, request: ModelRequest, **kwargs: Any) -> ModelResponse:
            if any(m.role == "assistant" for m in request.messages):
                run_id = request.run_id
                second_turn.set()  # the supervisor goes on: the late start, then this ask
                asked[0].status(run_id)  # behind the late start in the supervisor's inbox
                use_id = request.messages[-2].content[-1].id  # type: ignore[union-attr]
                checkpoint = store.load_checkpoint(run_id)  # (committed before that answer)
                assert checkpoint is not None
                seen.append(tuple(i for i in checkpoint.started if i == use_id))
            return super().complete(request, **kwargs)

    def stall(event: Event) -> None:
        """On the supervisor's thread: stalls it once, as the worker starts."""
        if event.kind is EventKind.STARTED and not stalled.is_set():
            stalled.set()
            second_turn.wait(WAIT)

    call = {"name": "effect", "input": {"name": "e"}}
    model = Watched({"worker": [{"tool_calls": [call]}, {"text": "saw: {result0}"}]})
    spec = AgentSpec(name="worker", description="d", prompt="p")
    try:
        with Runtime(
            [spec], model=model, store=store, tools=[Tool.from_function(effect)], workspace=repo
        ) as rt:
            asked.append(rt)
            rt.subscribe(stall)
            outcome = rt.run("worker", "go", wait=WAIT)
    finally:
        store.close()
    assert outcome.status is RunStatus.COMPLETED, outcome
    assert "did not record its start within 1 s" in (outcome.result or ""), outcome.result
    assert seen == [()]  # its start is not in the journal: it never ran
