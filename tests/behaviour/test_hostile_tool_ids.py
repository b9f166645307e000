"""A model (a hostile or buggy backend, a proxy) whose tool_use ids hold the characters the
request ids' grammar is made of (``behaviour/request_ids.py``: ``@``, ``#fan``,
``approve:``): each call is still answered as the call it is.

Before, a call's request id was its tool_use id with the turn appended, as given: a
``send_message`` under ``approve:X`` read as the approval asked of the parent for the call
``X`` (its acknowledgement taken for that approval's, the send never answered: the run hung
until its timeout; with a call ``X`` waiting for its parent in the same turn, the parent's
reply to the model's own mail approved ``X``), a ``spawn_subagent`` under ``Y#fan0`` read as a
``fan_out``'s child (never answered either). Real actors, the scripted model under a model
that gives the calls the ids.
"""

from __future__ import annotations

from typing import Any

from subagents import AgentSpec, Runtime
from subagents.behaviour import parent_approvals, request_ids
from subagents.behaviour.fan_out_tool import FanOutCalls
from subagents.messages import (
    MailAck,
    ModelRequest,
    ModelResponse,
    SpawnReply,
    ToolUseBlock,
)
from subagents.models.scripted import ScriptedModel

WAIT = 60.0
SPECS = [AgentSpec(name=n, description="d", prompt="p") for n in ("boss", "lead", "worker")]
HOSTILE = ("approve:toolu_x", "toolu_y#fan0", "a@0.1", "a@0.1#fan2", "", "é~")


class GivenIds:
    """The scripted model, the lead's tool calls of its first turn under ``ids``."""

    def __init__(self, script: dict[str, list[Any]], ids: tuple[str, ...]) -> None:
        self.scripted = ScriptedModel(script)
        self.ids = ids

    def complete(self, request: ModelRequest, **options: Any) -> ModelResponse:
        response = self.scripted.complete(request, **options)
        if request.agent != "lead" or any(m.role == "assistant" for m in request.messages):
            return response
        given = iter(self.ids)
        content = tuple(
            ToolUseBlock(id=next(given), name=b.name, input=b.input)
            if isinstance(b, ToolUseBlock)
            else b
            for b in response.content
        )
        return ModelResponse(
            content=content, stop_reason=response.stop_reason, usage=response.usage
        )


def _lead_result(call: dict[str, Any], use_id: str) -> str:
    """The lead's answer to its one call under ``use_id`` (through its parent, the boss)."""
    spawn_lead = {"name": "spawn_subagent", "input": {"agent": "lead", "task": "go"}}
    script = {
        "boss": [{"tool_calls": [spawn_lead]}, {"text": "{result0}"}],
        "lead": [{"tool_calls": [call]}, {"text": "lead got: {result0}"}],
        "worker": [{"text": "done {task}"}],
    }
    model = GivenIds(script, (use_id,))
    with Runtime(SPECS, model=model) as rt:  # type: ignore[arg-type]
        outcome = rt.spawn("boss", "go").result(timeout=WAIT)
    assert outcome.ok, outcome.error
    return outcome.result or ""


def test_a_send_under_an_approval_like_id_is_answered_as_a_send() -> None:
    send = {"name": "send_message", "input": {"to": "boss", "content": "hi"}}
    assert "mail_id" in _lead_result(send, "approve:toolu_x")


def test_a_spawn_under_a_fan_out_child_like_id_is_answered_as_a_spawn() -> None:
    spawn = {"name": "spawn_subagent", "input": {"agent": "worker", "task": "A"}}
    assert "done A" in _lead_result(spawn, "toolu_y#fan0")


def test_no_tool_use_id_makes_another_kind_of_request_id() -> None:
    """A call's request id is never an approval's nor a fan_out child's, nor another call's
    (the ids of the approval of ``toolu_x`` and of a send under ``approve:toolu_x`` were one)."""
    for use_id in HOSTILE:
        rid = request_ids.of_call(use_id, 0, 1)
        assert request_ids.use_id_of(rid) == use_id
        assert parent_approvals.use_id_of(rid) is None
        assert not FanOutCalls.owns(rid)
        approval = parent_approvals.key(rid)
        assert parent_approvals.use_id_of(approval) == use_id
    calls = {request_ids.of_call(u, 0, 1) for u in HOSTILE}
    approvals = {parent_approvals.key(request_ids.of_call(u, 0, 1)) for u in HOSTILE}
    assert len(calls) == len(HOSTILE) and not calls & approvals
    assert parent_approvals.key(request_ids.of_call("toolu_x", 0, 1)) not in calls


def test_a_resumed_turn_keeps_the_work_of_its_calls_whatever_their_ids() -> None:
    """(``this_turn``: a fan_out under ``approve:...`` kept its children; a send under it its
    acknowledgement.)"""
    uses = [ToolUseBlock(id=u, name="fan_out", input={}) for u in HOSTILE]
    recovered = [
        SpawnReply(request_id=request_ids.of_call(u, 0, 1) + "#fan0", run_id="r") for u in HOSTILE
    ]
    recovered += [MailAck(request_id=request_ids.of_call(u, 0, 1), mail_id="m") for u in HOSTILE]
    kept, done = request_ids.this_turn(recovered, uses, retries=0, step=1)
    assert list(kept) == recovered
    assert done == set(HOSTILE)
