"""TodoWrite: a run's todo list, kept with the run (its events in a real SQLite store) and
shown by `subagents info` (a real CLI process) and the live tree."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from subagents.cli.live import LiveTree
from subagents.definitions.spec import AgentSpec
from subagents.messages import RunStatus, ToolResultBlock
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime
from subagents.store.sqlite import SQLiteStore
from subagents.tools.base import ToolError
from subagents.tools.todo import ANSWER, TOOL, todos_in

from .conftest import WAIT

FIRST = [
    {"content": "Read the code", "status": "in_progress", "activeForm": "Reading the code"},
    {"content": "Run the tests", "status": "pending", "activeForm": "Running the tests"},
]
SECOND = [
    {"content": "Read the code", "status": "completed", "activeForm": "Reading the code"},
    {"content": "Run the tests", "status": "in_progress", "activeForm": "Running the tests"},
]


def todo_call(todos: list[dict[str, Any]]) -> dict[str, Any]:
    return {"name": "TodoWrite", "input": {"todos": todos}}


def test_the_todo_list_is_kept_with_the_run_and_shown(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    model = ScriptedModel(
        {
            "worker": [
                {"tool_calls": [todo_call(FIRST)]},
                {"tool_calls": [todo_call(SECOND)]},
                {"tool_calls": [todo_call([{"content": "", "status": "done"}])]},  # refused
                "done",
            ]
        }
    )
    worker = AgentSpec(name="worker", description="Works.", prompt="Work.")
    with Runtime([worker], model=model, store=SQLiteStore(db), permissions="plan") as rt:
        outcome = rt.run("worker", "go", wait=WAIT)
        assert outcome.status is RunStatus.COMPLETED, outcome
        events = rt.store.events(outcome.run_id)
    answers = [
        b
        for r in model.requests
        if r.messages[-1].role == "user"
        for b in r.messages[-1].content
        if isinstance(b, ToolResultBlock)
    ]
    assert [a.content for a in answers[:2]] == [ANSWER, ANSWER]  # plan mode: read-only
    assert answers[2].is_error and "invalid input for TodoWrite" in answers[2].content
    kept = todos_in(events)
    assert kept is not None and [(t.content, t.status) for t in kept] == [
        ("Read the code", "completed"),
        ("Run the tests", "in_progress"),
    ]
    # the live tree, fed the run's events
    tree = LiveTree()
    for event in events:
        tree.on_event(event)
    assert tree.rows[outcome.run_id].todos == "todos 1/2: Running the tests"
    # `subagents info`, from the store file, in another process
    info = subprocess.run(
        [sys.executable, "-m", "subagents.cli.main", "info", outcome.run_id, "--state", str(db)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert "[x] Read the code" in info.stdout and "[>] Run the tests" in info.stdout
    shown = subprocess.run(
        [sys.executable, "-m", "subagents.cli.main", "info", outcome.run_id, "--state", str(db),
         "--json"],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    assert [t["status"] for t in json.loads(shown.stdout)["todos"]] == ["completed", "in_progress"]


def test_todo_write_checks_its_input() -> None:
    assert TOOL.call({"todos": FIRST}) == ANSWER
    assert TOOL.call({"todos": [{"content": "x", "status": "pending", "id": "1",
                                 "priority": "high"}]}) == ANSWER  # fmt: skip
    with pytest.raises(ToolError, match="invalid input for TodoWrite"):
        TOOL.call({"todos": [{"content": "x", "status": "started"}]})
    with pytest.raises(ToolError, match="at most 200"):
        TOOL.call({"todos": [{"content": "x", "status": "pending"}] * 201})
