"""Two tool calls of one model turn sharing an id are each run and answered under an id of
their own (the later ones renamed), never the second silently handed the first's answer."""

from __future__ import annotations

import threading

import msgspec
import pytest

from subagents import AgentSpec, Runtime, ScriptedModel
from subagents.behaviour.tools import SPAWN
from subagents.messages import (
    ModelRequest,
    ModelResponse,
    RunStatus,
    ToolResultBlock,
    ToolUseBlock,
)
from subagents.models.base import CancelSignal

from .conftest import WAIT

pytestmark = pytest.mark.usefixtures("no_new_threads")


class OneIdModel:
    """A model backend that gives every tool call of a turn the id ``same`` (a backend's
    bug); what it was asked is kept."""

    def __init__(self) -> None:
        self.scripted = ScriptedModel(
            {
                "lead": [
                    {
                        "tool_calls": [
                            {"name": "echo", "input": {"text": "a"}},
                            {"name": "echo", "input": {"text": "b"}},
                            {"name": SPAWN, "input": {"agent": "worker", "task": "c"}},
                            {"name": SPAWN, "input": {"agent": "worker", "task": "d"}},
                        ]
                    },
                    "done",
                ]
            }
        )
        self.lock = threading.Lock()
        self.requests: list[ModelRequest] = []

    def complete(
        self,
        request: ModelRequest,
        *,
        deadline: float | None = None,
        cancel: CancelSignal | None = None,
    ) -> ModelResponse:
        with self.lock:
            self.requests.append(request)
        response = self.scripted.complete(request, deadline=deadline, cancel=cancel)
        content = tuple(
            msgspec.structs.replace(b, id="same") if isinstance(b, ToolUseBlock) else b
            for b in response.content
        )
        return msgspec.structs.replace(response, content=content)


def test_calls_sharing_an_id_are_each_run_and_answered() -> None:
    ran: list[str] = []

    def echo(text: str) -> str:
        """Echo the text."""
        ran.append(text)
        return f"echo {text}"

    model = OneIdModel()
    agents = [AgentSpec(name="lead", description="l"), AgentSpec(name="worker", description="w")]
    with Runtime(agents, model=model, tools=[echo]) as rt:
        outcome = rt.run("lead", "go", wait=WAIT)
        assert outcome.status is RunStatus.COMPLETED, outcome
        assert sorted(ran) == ["a", "b"]
        assert sorted(r.task for r in rt.runs(agent="worker")) == ["c", "d"]
    second = [r for r in model.requests if r.agent == "lead"][1]
    assistant, answers = second.messages[-2], second.messages[-1]
    ids = [b.id for b in assistant.content if isinstance(b, ToolUseBlock)]
    assert ids == ["same", "same_2", "same_3", "same_4"]
    results = [b for b in answers.content if isinstance(b, ToolResultBlock)]
    assert [r.tool_use_id for r in results] == ids
    assert [r.content for r in results[:2]] == ["echo a", "echo b"]
    tasks = [msgspec.json.decode(r.content)["result"] for r in results[2:]]
    assert tasks == ["worker finished: c", "worker finished: d"]
