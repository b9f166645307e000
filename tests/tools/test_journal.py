"""The tool journal inside one process: a side-effecting call is in the store before it runs,
a read-only or idempotent one is not (it pays no round trip), and the decisions of
``tools.journal`` for a resumed run."""

from __future__ import annotations

from pathlib import Path

from subagents.definitions.spec import AgentSpec
from subagents.messages import RunStatus
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
