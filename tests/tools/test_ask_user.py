"""AskUserQuestion: the questions go to the requester (the approval handler, or the parent
agent as mail with Runtime(ask_parent=True)), and the answer comes back to the model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from subagents.definitions.spec import AgentSpec
from subagents.messages import RunStatus, ToolResultBlock
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime
from subagents.tools.approval import Approval, ApprovalRequest

from .conftest import WAIT

QUESTIONS = {
    "questions": [
        {
            "question": "Which store should the cache use?",
            "header": "Store",
            "options": [
                {"label": "SQLite", "description": "a file"},
                {"label": "Memory", "description": "lost on exit"},
            ],
            "multiSelect": False,
        }
    ]
}
ASKER = [
    {"tool_calls": [{"name": "AskUserQuestion", "input": QUESTIONS}]},
    {"text": "asker: {result0}"},
]


def agent(name: str) -> AgentSpec:
    return AgentSpec(name=name, description=f"The {name} agent.", prompt="You act.")


def answers(model: ScriptedModel, name: str) -> list[ToolResultBlock]:
    return [
        b
        for r in model.requests
        if r.agent == name and r.messages[-1].role == "user"
        for b in r.messages[-1].content
        if isinstance(b, ToolResultBlock)
    ]


def test_the_approval_handler_answers_the_questions_even_in_plan_mode(tmp_path: Path) -> None:
    asked: list[ApprovalRequest] = []

    def handler(request: ApprovalRequest) -> Approval:
        asked.append(request)
        return Approval(True, "SQLite, in .cache/")

    model = ScriptedModel({"asker": ASKER})
    with Runtime([agent("asker")], model=model, workspace=tmp_path, approve=handler,
                 permissions="bypassPermissions") as rt:  # fmt: skip
        assert rt.run("asker", "go", wait=WAIT).status is RunStatus.COMPLETED
    with Runtime([agent("asker")], model=ScriptedModel({"asker": ASKER}), workspace=tmp_path,
                 approve=handler, permissions="plan") as rt:  # fmt: skip
        assert rt.run("asker", "go", wait=WAIT).status is RunStatus.COMPLETED
    assert len(asked) == 2  # asked in bypassPermissions and in plan mode alike
    assert asked[0].tool == "AskUserQuestion" and asked[0].input == QUESTIONS
    (answer,) = answers(model, "asker")
    assert not answer.is_error
    assert answer.content == (
        'User has answered your questions: "Which store should the cache use?"="SQLite, in'
        " .cache/\". You can now continue with the user's answers in mind."
    )


def test_without_a_handler_or_with_a_no_the_model_hears_it(tmp_path: Path) -> None:
    model = ScriptedModel({"asker": ASKER})
    with Runtime([agent("asker")], model=model, workspace=tmp_path) as rt:
        assert rt.run("asker", "go", wait=WAIT).status is RunStatus.COMPLETED
    (unanswered,) = answers(model, "asker")
    assert unanswered.is_error and "no approval handler" in unanswered.content
    declined = ScriptedModel({"asker": ASKER})
    with Runtime([agent("asker")], model=declined, workspace=tmp_path,
                 approve=lambda r: False) as rt:  # fmt: skip
        assert rt.run("asker", "go", wait=WAIT).status is RunStatus.COMPLETED
    (no,) = answers(declined, "asker")
    assert no.is_error and "AskUserQuestion was not approved" in no.content


def lead_answering(answer: str) -> list[dict[str, Any]]:
    return [
        {"tool_calls": [
            {"name": "spawn_subagent",
             "input": {"agent": "asker", "task": "ask", "background": True}},
            {"name": "wait_for_message", "input": {"timeout": 30}},
        ]},
        {"tool_calls": [
            {"name": "send_message",
             "input": {"to": "{mail_from}", "content": answer, "reply_to": "{mail_id}"}},
            {"name": "wait_for_message", "input": {"timeout": 30}},
        ]},
        {"text": "lead done"},
    ]  # fmt: skip


def test_a_childs_questions_go_to_its_parent_whose_reply_is_the_answer(tmp_path: Path) -> None:
    model = ScriptedModel({"lead": lead_answering("Memory is fine"), "asker": ASKER})
    with Runtime([agent("lead"), agent("asker")], model=model, workspace=tmp_path,
                 ask_parent=True) as rt:  # fmt: skip
        assert rt.run("lead", "go", wait=WAIT).status is RunStatus.COMPLETED
        (child,) = [r for r in rt.runs() if r.agent == "asker"]
        assert child.outcome is not None and child.outcome.result is not None
    assert '"Which store should the cache use?"="Memory is fine"' in child.outcome.result
    asked = [r for r in model.requests if r.agent == "lead"][1].messages[-1].content
    shown = " ".join(getattr(b, "content", "") for b in asked)
    assert "Questions from asker (" in shown
    assert "1. Which store should the cache use?" in shown and "- SQLite: a file" in shown
