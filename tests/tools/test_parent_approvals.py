"""Approvals routed up the tree: with Runtime(ask_parent=True) a child's "ask" is mailed to
its parent agent, whose reply lets the call run or refuses it; a parent that cannot read
mail (waiting on this child) makes the request time out, never deadlock."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from subagents.definitions.spec import AgentSpec
from subagents.messages import RunStatus
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime
from subagents.tools.approval import ApprovalRequest

from .conftest import WAIT


def agent(name: str, mode: str | None = None) -> AgentSpec:
    return AgentSpec(
        name=name, description=f"The {name} agent.", prompt="You act.", permission_mode=mode
    )


# A parent approves only what it could do itself: the lead runs in the runtime's
# bypassPermissions, the child's definition asks for default mode (so its Bash is asked).
AGENTS = [agent("lead"), agent("child", "default")]
BYPASS = "bypassPermissions"


def lead_answering(answer: str) -> list[dict[str, Any]]:
    """A lead that starts the child in the background, answers its request, waits for it."""
    return [
        {"tool_calls": [
            {"name": "spawn_subagent",
             "input": {"agent": "child", "task": "write", "background": True}},
            {"name": "wait_for_message", "input": {"timeout": 10}},
        ]},
        {"tool_calls": [
            {"name": "send_message",
             "input": {"to": "{mail_from}", "content": answer, "reply_to": "{mail_id}"}},
            {"name": "wait_for_message", "input": {"timeout": 10}},
        ]},
        {"text": "request: {result1}"},
    ]  # fmt: skip


CHILD = [
    {"tool_calls": [{"name": "Bash", "input": {"command": "echo done > out.txt"}}]},
    {"text": "child: {result0}"},
]


def child_result(rt: Runtime) -> str:
    (child,) = [r for r in rt.runs() if r.agent == "child"]
    assert child.outcome is not None and child.outcome.result is not None
    return child.outcome.result


def test_the_parent_allows_a_childs_call(repo: Path) -> None:
    model = ScriptedModel({"lead": lead_answering("allow, go ahead"), "child": CHILD})
    with Runtime(AGENTS, model=model, workspace=repo, ask_parent=True, permissions=BYPASS) as rt:
        outcome = rt.run("lead", "go", wait=WAIT)
        assert outcome.status is RunStatus.COMPLETED, outcome
        assert (repo / "out.txt").read_text() == "done\n"
        assert child_result(rt) == "child: (no output)"
    assert outcome.result is not None and '"result":"child: (no output)"' in outcome.result
    # what the lead was asked (the mail its wait_for_message read): who wants what, and how
    # to answer
    asked = [r for r in model.requests if r.agent == "lead"][1].messages[-1].content
    shown = " ".join(getattr(b, "content", "") for b in asked)
    assert "Permission request: child (" in shown
    assert 'wants to call Bash with {"command":"echo done > out.txt"}' in shown
    assert "starting with 'allow'" in shown


def test_the_parent_refuses_and_the_child_hears_why(repo: Path) -> None:
    model = ScriptedModel({"lead": lead_answering("deny: not before the review"), "child": CHILD})
    with Runtime(AGENTS, model=model, workspace=repo, ask_parent=True, permissions=BYPASS) as rt:
        assert rt.run("lead", "go", wait=WAIT).status is RunStatus.COMPLETED
        assert not (repo / "out.txt").exists()
        assert child_result(rt) == (
            "child: Permission to use Bash was denied: the parent (lead) said: deny: not before"
            " the review"
        )


def test_a_parent_waiting_on_the_child_cannot_answer_so_the_request_times_out(
    repo: Path,
) -> None:
    model = ScriptedModel(
        {
            "lead": [
                {"tool_calls": [{"name": "spawn_subagent",
                                 "input": {"agent": "child", "task": "write"}}]},
                {"text": "lead got: {result0_result}"},
            ],
            "child": CHILD,
        }
    )  # fmt: skip
    asked: list[ApprovalRequest] = []

    def handler(request: ApprovalRequest) -> bool:
        asked.append(request)
        return True

    with Runtime(
        AGENTS, model=model, workspace=repo, ask_parent=True, approval_wait_s=0.3,
        approve=handler, permissions=BYPASS,
    ) as rt:  # fmt: skip
        outcome = rt.run("lead", "go", wait=WAIT)
    assert outcome.status is RunStatus.COMPLETED
    assert outcome.result is not None
    assert "the parent did not answer the request within 0.3 s" in outcome.result
    assert not (repo / "out.txt").exists()
    assert asked == []  # a child's ask goes to its parent, not to the handler


def test_a_parent_cannot_approve_what_it_could_not_do_itself(repo: Path) -> None:
    """Both in default mode: the lead's own Bash would be asked, so it may not answer the
    child's. The request goes up to the runtime's handler (here one that says no), and the
    lead is never mailed."""
    model = ScriptedModel({"lead": lead_answering("allow"), "child": CHILD})
    asked: list[ApprovalRequest] = []

    def handler(request: ApprovalRequest) -> bool:
        asked.append(request)
        return False

    with Runtime(
        [agent("lead"), agent("child")], model=model, workspace=repo, ask_parent=True,
        approve=handler,
    ) as rt:  # fmt: skip
        assert rt.run("lead", "go", wait=WAIT).status is RunStatus.COMPLETED
        assert not (repo / "out.txt").exists()
        assert child_result(rt) == "child: Permission to use Bash was denied: Bash was not approved"
    (request,) = asked
    assert request.agent == "child" and request.tool == "Bash"
    assert "the parent (lead r" in request.reason
    assert "could not make this call itself (Bash needs approval in default mode)" in (
        request.reason
    )
    # the lead's wait read no permission request: it timed out with nothing
    lead_calls = [r for r in model.requests if r.agent == "lead"]
    shown = " ".join(
        getattr(b, "content", "") for r in lead_calls for m in r.messages for b in m.content
        if not isinstance(m.content, str)
    )  # fmt: skip
    assert "Permission request" not in shown


def test_a_plan_mode_parent_cannot_approve_a_childs_bash(repo: Path) -> None:
    """The trial's case: a plan-mode lead approved, through ask_parent, a child's Bash it
    cannot run itself. The child now runs in plan mode too (its requester's), its Bash is
    refused as plan mode's, and without a handler nothing runs."""
    model = ScriptedModel({"lead": lead_answering("allow"), "child": CHILD})
    with Runtime(
        [agent("lead", "plan"), agent("child", "default")], model=model, workspace=repo,
        ask_parent=True, permissions=BYPASS, approval_wait_s=2.0,
    ) as rt:  # fmt: skip
        assert rt.run("lead", "go", wait=WAIT).status is RunStatus.COMPLETED
        result = child_result(rt)
    assert not (repo / "out.txt").exists()
    assert result.startswith("child: Permission to use Bash was denied: plan mode is read-only")


def test_a_parent_cannot_approve_a_tool_it_is_not_offered(repo: Path) -> None:
    """The lead holds bypassPermissions but its tools are only the runtime's: it could not
    call Bash itself, so it may not approve the child's; the handler is asked, told why."""
    model = ScriptedModel({"lead": lead_answering("allow"), "child": CHILD})
    asked: list[ApprovalRequest] = []

    def handler(request: ApprovalRequest) -> bool:
        asked.append(request)
        return False

    lead = AgentSpec(
        name="lead", description="Delegates.", prompt="You delegate.",
        tools=("spawn_subagent", "send_message", "wait_for_message"),
    )  # fmt: skip
    with Runtime(
        [lead, agent("child", "default")], model=model, workspace=repo, ask_parent=True,
        approve=handler, permissions=BYPASS,
    ) as rt:  # fmt: skip
        assert rt.run("lead", "go", wait=WAIT).status is RunStatus.COMPLETED
        assert child_result(rt) == "child: Permission to use Bash was denied: Bash was not approved"
    assert not (repo / "out.txt").exists()
    (request,) = asked
    assert "since it may not call Bash itself (its tools: spawn_subagent, send_message," in (
        request.reason
    )
