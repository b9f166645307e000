"""ExitPlanMode in a real runtime in plan mode: accepted, and the plan ends the run's turn."""

from __future__ import annotations

import pytest

from subagents.definitions.spec import AgentSpec
from subagents.messages import RunStatus, ToolResultBlock
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime
from subagents.tools.base import ToolError
from subagents.tools.plan_mode import TOOL

from .conftest import WAIT


def test_a_model_in_plan_mode_presents_its_plan_and_is_told_to_answer_with_it() -> None:
    plan = "1. Fix add\n2. Run the tests"
    model = ScriptedModel(
        {
            "planner": [
                {"tool_calls": [{"name": "ExitPlanMode", "input": {"plan": plan}}]},
                {"text": plan},
            ]
        }
    )
    planner = AgentSpec(name="planner", description="Plans.", prompt="Plan.")
    with Runtime([planner], model=model, permissions="plan") as rt:
        outcome = rt.run("planner", "plan the fix", wait=WAIT)
    assert outcome.status is RunStatus.COMPLETED and outcome.result == plan
    (answer,) = [
        b for b in model.requests[1].messages[-1].content if isinstance(b, ToolResultBlock)
    ]
    assert not answer.is_error
    assert "Your plan is recorded" in answer.content and "final answer" in answer.content


def test_exit_plan_mode_needs_a_plan() -> None:
    with pytest.raises(ToolError, match="plan is empty"):
        TOOL.call({"plan": "  "})
    with pytest.raises(ToolError, match="invalid input for ExitPlanMode"):
        TOOL.call({})
