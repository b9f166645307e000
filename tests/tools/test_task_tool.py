"""Claude Code's ``Task`` tool on the runtime's spawn path: real runtimes, scripted models."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from subagents.cli.live import LiveTree, tool_summary
from subagents.definitions.spec import AgentSpec
from subagents.messages import RunRecord, RunStatus, ToolResultBlock
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime

from .conftest import WAIT


def agent(name: str, **fields: Any) -> AgentSpec:
    return AgentSpec(name=name, description=f"The {name} agent.", prompt="You act.", **fields)


def task(subagent_type: str, prompt: str, description: str, **more: Any) -> dict[str, Any]:
    return {
        "name": "Task",
        "input": {
            "description": description,
            "prompt": prompt,
            "subagent_type": subagent_type,
            **more,
        },
    }


def children(rt: Runtime, run_id: str) -> list[RunRecord]:
    return [r for r in rt.runs(root_run_id=run_id) if r.parent_run_id == run_id]


def answers(model: ScriptedModel, name: str) -> list[ToolResultBlock]:
    out: list[ToolResultBlock] = []
    for request in model.requests:
        if request.agent == name and request.messages[-1].role == "user":
            out += [b for b in request.messages[-1].content if isinstance(b, ToolResultBlock)]
    return out


def test_a_task_call_spawns_the_subagent_and_answers_with_its_result() -> None:
    model = ScriptedModel(
        {
            # Claude Code's "Explore" names our "explore" (types compare without case)
            "lead": [
                {"tool_calls": [task("Explore", "find where add is defined", "find add")]},
                "lead: done",
            ],
            "explore": ["add is in calc.py"],
        }
    )
    team = [agent("lead", tools=("Task", "Read")), agent("explore")]
    with Runtime(team, model=model) as rt:
        outcome = rt.run("lead", "go", wait=WAIT)
        assert outcome.status is RunStatus.COMPLETED, outcome
        (child,) = children(rt, outcome.run_id)
        assert (child.agent, child.task, child.label) == (
            "explore",
            "find where add is defined",
            "find add",
        )
        events = rt.store.events(outcome.run_id)
    # the live tree: a Task call is a spawn (its note names the agent), not a hand action
    tree = LiveTree()
    for event in events:
        tree.on_event(event)
    assert not [line for line in tree.drain() if "Task" in line]
    assert tool_summary({"tool": "Task", "input": {"subagent_type": "explore"}}) == "Task explore"
    (answer,) = answers(model, "lead")
    assert not answer.is_error
    assert json.loads(answer.content)["result"] == "add is in calc.py"
    lead_first = next(r for r in model.requests if r.agent == "lead")
    offered = {t.name: t for t in lead_first.tools}
    schema = offered["Task"].input_schema
    assert schema["required"] == ["description", "prompt", "subagent_type"]
    assert schema["properties"]["subagent_type"]["enum"] == ["explore"]


def test_task_in_the_background_answers_with_the_run_id_at_once() -> None:
    model = ScriptedModel(
        {
            "lead": [
                {"tool_calls": [task("worker", "w", "bg job", run_in_background=True)]},
                "lead: started",
            ],
            "worker": ["worked"],
        }
    )
    with Runtime([agent("lead"), agent("worker")], model=model) as rt:
        outcome = rt.run("lead", "go", wait=WAIT)
        assert outcome.status is RunStatus.COMPLETED, outcome
        (child,) = children(rt, outcome.run_id)
    (answer,) = answers(model, "lead")
    assert json.loads(answer.content)["run_id"] == child.run_id


def test_task_is_offered_only_where_the_definition_allows_it() -> None:
    model = ScriptedModel({"only_spawn": ["a"], "no_task": ["b"], "everything": ["c"]})
    team = [
        agent("only_spawn", tools=("spawn_subagent",)),
        agent("no_task", disallowed_tools=("Task",)),
        agent("everything"),
        agent("helper"),
    ]
    with Runtime(team, model=model) as rt:
        for name in ("only_spawn", "no_task", "everything"):
            assert rt.run(name, "go", wait=WAIT).status is RunStatus.COMPLETED
    offered = {r.agent: {t.name for t in r.tools} for r in model.requests}
    assert "spawn_subagent" in offered["only_spawn"] and "Task" not in offered["only_spawn"]
    assert "Task" not in offered["no_task"]
    assert {"Task", "spawn_subagent"} <= offered["everything"]


def test_a_task_call_missing_its_prompt_is_an_error_the_model_reads() -> None:
    model = ScriptedModel(
        {
            "lead": [
                {"tool_calls": [{"name": "Task", "input": {"subagent_type": "worker"}}]},
                "lead: saw it",
            ]
        }
    )
    with Runtime([agent("lead"), agent("worker")], model=model) as rt:
        outcome = rt.run("lead", "go", wait=WAIT)
        assert children(rt, outcome.run_id) == []
    (answer,) = answers(model, "lead")
    assert answer.is_error and answer.content == "missing or empty required argument 'prompt'"


def test_a_pre_tool_use_hook_matching_task_sees_and_may_block_it(tmp_path: Path) -> None:
    seen = tmp_path / "seen.json"
    script = f"cat > {seen}; echo 'no delegating today' >&2; exit 2"
    hooks = {"PreToolUse": [{"matcher": "Task", "hooks": [{"type": "command", "command": script}]}]}
    model = ScriptedModel(
        {
            "lead": [
                {
                    "tool_calls": [
                        task("worker", "w", "blocked job"),
                        {"name": "spawn_subagent", "input": {"agent": "worker", "task": "w2"}},
                    ]
                },
                "lead: done",
            ],
            "worker": ["worked"],
        }
    )
    with Runtime([agent("lead", hooks=hooks), agent("worker")], model=model,
                 workspace=tmp_path, allow_hooks=True) as rt:  # fmt: skip
        outcome = rt.run("lead", "go", wait=WAIT)
        assert outcome.status is RunStatus.COMPLETED, outcome
        (child,) = children(rt, outcome.run_id)  # only spawn_subagent's: the matcher is Task
        assert child.task == "w2"
    blocked, spawned = answers(model, "lead")
    assert blocked.is_error
    assert blocked.content == "PreToolUse hook blocked this call: no delegating today"
    assert not spawned.is_error
    shown = json.loads(seen.read_text())
    assert shown["tool_name"] == "Task" and shown["tool_input"]["subagent_type"] == "worker"


def test_task_resume_continues_an_earlier_agent_with_its_conversation() -> None:
    model = ScriptedModel(
        {
            "lead": [
                {"tool_calls": [task("worker", "first job", "one")]},
                {"tool_calls": [task("worker", "second job", "two", resume="{result0_run_id}")]},
                "lead: {result0_result}",
            ],
            "worker": ["worker one", "worker two"],
        }
    )
    with Runtime([agent("lead", tools=("Task",)), agent("worker")], model=model) as rt:
        outcome = rt.run("lead", "go", wait=WAIT)
        assert outcome.result == "lead: worker two", outcome
        first, second = sorted(children(rt, outcome.run_id), key=lambda r: r.created_at)
        assert second.continues == first.run_id and second.task == "second job"
    shown = [r for r in model.requests if r.agent == "worker"][-1].messages
    assert [m.role for m in shown] == ["user", "assistant", "user"]
