"""ExitPlanMode in a real runtime: the plan is put to the run's approver; approved, the run
leaves plan mode (its permissions and its processes' sandbox), denied or held in plan mode by
a requester, it stays there. The Bash calls are real commands in the real sandbox."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from subagents.definitions.spec import AgentSpec
from subagents.messages import RunStatus, ToolResultBlock
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime
from subagents.tools.approval import ApprovalRequest
from subagents.tools.base import Tool, ToolError
from subagents.tools.bash import BASH, BashInput
from subagents.tools.plan_mode import TOOL
from subagents.tools.sandbox_exec import kernel_abi

from .conftest import WAIT

landlock = pytest.mark.skipif(kernel_abi() < 4, reason="the kernel offers no Landlock ABI 4+")
PLAN = "1. Write out.txt\n2. Say so"
WRITE = {"name": "Bash", "input": {"command": "echo written > out.txt"}}
EXIT = {"name": "ExitPlanMode", "input": {"plan": PLAN}}
TRUSTING_BASH = Tool(
    name="Bash",
    description=BASH.description,
    input_schema=BASH.input_schema,
    run=BASH.run,
    read_only=True,  # plan mode lets every command through: only the sandbox may refuse
    params=BashInput,
)


def agent(name: str, **fields: Any) -> AgentSpec:
    return AgentSpec(name=name, description=f"The {name} agent.", prompt="You act.", **fields)


def results(model: ScriptedModel, name: str) -> list[ToolResultBlock]:
    """Every tool result ``name``'s model was shown, in order."""
    out: list[ToolResultBlock] = []
    for request in model.requests:
        if request.agent == name and request.messages[-1].role == "user":
            out += [b for b in request.messages[-1].content if isinstance(b, ToolResultBlock)]
    return out


class Approver:
    """The runtime's approval handler: answers ExitPlanMode with ``plan``, anything else yes."""

    def __init__(self, plan: bool) -> None:
        self.plan = plan
        self.asked: list[ApprovalRequest] = []

    def __call__(self, request: ApprovalRequest) -> bool:
        self.asked.append(request)
        return self.plan if request.tool == "ExitPlanMode" else True


def planner_run(tmp_path: Path, approver: Approver, **options: Any) -> ScriptedModel:
    model = ScriptedModel(
        {"planner": [{"tool_calls": [WRITE]}, {"tool_calls": [EXIT]}, {"tool_calls": [WRITE]},
                     "done"]}
    )  # fmt: skip
    with Runtime([agent("planner")], model=model, workspace=tmp_path, approve=approver,
                 permissions="plan", **options) as rt:  # fmt: skip
        outcome = rt.run("planner", "plan, then write", wait=WAIT)
    assert outcome.status is RunStatus.COMPLETED, outcome
    return model


@landlock
def test_an_approved_plan_leaves_plan_mode_and_the_same_write_then_works(tmp_path: Path) -> None:
    approver = Approver(plan=True)
    model = planner_run(tmp_path, approver)
    before, exit_answer, after = results(model, "planner")
    assert before.is_error and "plan mode is read-only" in before.content
    assert not exit_answer.is_error, exit_answer.content
    assert exit_answer.content.startswith("Your plan is approved: you have left plan mode")
    assert "default mode" in exit_answer.content  # runtime in plan, definition silent
    assert not after.is_error, after.content
    assert (tmp_path / "out.txt").read_text() == "written\n"
    asked = approver.asked[0]
    assert asked.tool == "ExitPlanMode" and asked.input == {"plan": PLAN}
    assert "asks to leave plan mode for default mode" in asked.reason


@landlock
def test_the_sandbox_follows_the_mode_out_of_plan_mode(tmp_path: Path) -> None:
    """With a Bash the permission policy trusts, only the sandbox refuses the write in plan
    mode; after the approved plan, the run's processes may write its workspace."""
    model = planner_run(tmp_path, Approver(plan=True), tools=[TRUSTING_BASH])
    before, _, after = results(model, "planner")
    assert before.is_error and "out.txt" in before.content, before.content  # the kernel said no
    assert not after.is_error, after.content
    assert (tmp_path / "out.txt").read_text() == "written\n"


def test_a_denied_plan_stays_in_plan_mode(tmp_path: Path) -> None:
    model = planner_run(tmp_path, Approver(plan=False))
    before, exit_answer, after = results(model, "planner")
    assert exit_answer.is_error
    assert exit_answer.content.startswith("Permission to use ExitPlanMode was denied")
    assert before.is_error and after.is_error and "plan mode is read-only" in after.content
    assert not (tmp_path / "out.txt").exists()


def test_a_child_of_a_plan_mode_lead_cannot_leave_plan_mode_whoever_approves(
    tmp_path: Path,
) -> None:
    approver = Approver(plan=True)
    spawn = {"name": "spawn_subagent", "input": {"agent": "child", "task": "plan, then write"}}
    model = ScriptedModel(
        {
            "lead": [{"tool_calls": [spawn]}, "lead: {result0}"],
            "child": [{"tool_calls": [EXIT]}, {"tool_calls": [WRITE]}, "done"],
        }
    )
    with Runtime([agent("lead", permission_mode="plan"), agent("child")], model=model,
                 workspace=tmp_path, approve=approver,
                 permissions="bypassPermissions") as rt:  # fmt: skip
        outcome = rt.run("lead", "go", wait=WAIT)
    assert outcome.status is RunStatus.COMPLETED
    exit_answer, write = results(model, "child")
    assert exit_answer.is_error and "is in plan mode" in exit_answer.content
    assert "requesting run lead" in exit_answer.content, exit_answer.content
    assert write.is_error and "plan mode is read-only" in write.content
    assert not (tmp_path / "out.txt").exists()
    assert not approver.asked  # nothing to approve: the ceiling decided


def test_a_run_not_in_plan_mode_is_told_there_is_none_to_leave(tmp_path: Path) -> None:
    approver = Approver(plan=True)
    model = ScriptedModel({"worker": [{"tool_calls": [EXIT]}, "done"]})
    with Runtime([agent("worker")], model=model, workspace=tmp_path, approve=approver) as rt:
        rt.run("worker", "go", wait=WAIT)
    (answer,) = results(model, "worker")
    assert answer.is_error and "not in plan mode (it runs in default mode)" in answer.content
    assert not approver.asked


def test_exit_plan_mode_needs_a_plan() -> None:
    with pytest.raises(ToolError, match="plan is empty"):
        TOOL.call({"plan": "  "})
    with pytest.raises(ToolError, match="invalid input for ExitPlanMode"):
        TOOL.call({})
