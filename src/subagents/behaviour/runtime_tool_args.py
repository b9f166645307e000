"""The runtime's own tools read from a model's call into the requests the supervisor takes.

Why a module of its own: the arguments of a model's ``spawn_agent``, ``send_message``,
``stop_agent`` and ``wait_for_message`` calls are untrusted input. Every check of them, and
the ``ToolError`` the model is shown when one fails, is here, as pure functions from the
call's arguments to plain-data messages (``SpawnRequest``, ``SendMail``, ``StopRequest``),
testable without an actor; so is the way the supervisor's replies come back as the calls'
results (``reply_answer``). ``LLMBehaviour`` decides when to send them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from subagents.behaviour.port import AgentPort
from subagents.behaviour.spawn_arguments import spawn_policy_fields
from subagents.behaviour.tools import TASK, ToolError
from subagents.messages import (
    ChildDone,
    MailAck,
    RunRecord,
    SendMail,
    SpawnRequest,
    StopReply,
    StopRequest,
    Subscribe,
    ToolSchema,
    topic_problem,
)

WAIT_S = 30.0
"""How long ``wait_for_message`` waits when the model names no timeout."""


def spawn_request(use_id: str, args: dict[str, Any], parent: str) -> SpawnRequest:
    """A ``spawn_agent`` call of run ``parent`` as the request of its child."""
    return SpawnRequest(
        request_id=use_id,
        agent=required_str(args, "agent"),
        task=required_str(args, "task"),
        parent_run_id=parent,
        context=optional_str(args, "context"),
        label=optional_str(args, "label"),
        model=optional_str(args, "model"),
        timeout=optional_float(args, "timeout"),
        background=bool(args.get("background", False) or args.get("detach", False)),
        detach=bool(args.get("detach", False)),
        continues=optional_str(args, "continue_run"),
        **spawn_policy_fields(args),
    )


def task_arguments(args: dict[str, Any], offered: Iterable[ToolSchema]) -> dict[str, Any]:
    """A ``Task`` call's arguments as ``spawn_subagent``'s: ``subagent_type`` is the agent
    (matched without case among those the offered ``Task`` names, as Claude Code's
    ``Explore`` is our ``explore``), ``prompt`` the task, ``description`` the label,
    ``run_in_background`` the background flag, ``resume`` the run to continue
    (``continue_run``)."""
    agent = required_str(args, "subagent_type")
    agents = [
        name
        for schema in offered
        if schema.name == TASK
        for name in schema.input_schema["properties"]["subagent_type"]["enum"]
    ]
    exact = {name.lower(): name for name in agents}
    spawned: dict[str, Any] = {
        "agent": exact.get(agent.lower(), agent),
        "task": required_str(args, "prompt"),
        "label": optional_str(args, "description"),
        "background": bool(args.get("run_in_background", False)),
    }
    for ours, theirs in (("model", "model"), ("continue_run", "resume")):
        if args.get(theirs) is not None:
            spawned[ours] = args[theirs]
    return spawned


def subscription(port: AgentPort, run_id: str, subscribe: bool, args: dict[str, Any]) -> str:
    """A ``subscribe`` (or ``unsubscribe``) call: told to the supervisor with the turn's
    other reports; its answer, at once (``ToolError`` for a bad topic name)."""
    topic = required_str(args, "topic")
    problem = topic_problem(topic)
    if problem is not None:
        raise ToolError(problem)
    port.subscribe(Subscribe(run_id=run_id, topic=topic, subscribe=subscribe))
    if subscribe:
        return (
            f"subscribed to topic:{topic}: mail runs of your tree send to it from now on"
            " reaches you"
        )
    return f"unsubscribed from topic:{topic}"


def send_request(use_id: str, args: dict[str, Any], sender: str) -> SendMail:
    """A ``send_message`` call of run ``sender`` as the mail it sends."""
    return SendMail(
        request_id=use_id,
        sender=sender,
        to=required_str(args, "to"),
        content=required_str(args, "content"),
        reply_to=optional_str(args, "reply_to"),
    )


def stop_request(use_id: str, args: dict[str, Any], record: RunRecord) -> StopRequest:
    """A ``stop_agent`` call of the run of ``record`` as its stop request."""
    return StopRequest(
        request_id=use_id,
        run_id=required_str(args, "run_id"),
        requester=record.run_id,
        reason=f"stopped by {record.agent} ({record.run_id})",
    )


def wait_timeout(args: dict[str, Any]) -> float:
    """The seconds a ``wait_for_message`` call waits (0 means: do not wait)."""
    given = optional_float(args, "timeout")
    timeout = WAIT_S if given is None else given
    if not timeout >= 0:  # (NaN too: a wait for it would never end, nor time out)
        raise ToolError(f"argument 'timeout' must be >= 0 seconds, got {timeout:g}")
    return timeout


def required_str(args: dict[str, Any], key: str) -> str:
    value = args.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ToolError(f"missing or empty required argument {key!r}")
    return value


def optional_str(args: dict[str, Any], key: str) -> str | None:
    value = args.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ToolError(f"argument {key!r} must be a string, got {type(value).__name__}")
    return value


def optional_float(args: dict[str, Any], key: str) -> float | None:
    value = args.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ToolError(f"argument {key!r} must be a number, got {value!r}")
    return float(value)


def reply_answer(message: ChildDone | MailAck | StopReply) -> tuple[str, bool]:
    """The supervisor's reply to one of those requests as the call's result: (content,
    is_error). A child's outcome comes back as JSON with its result, status and usage."""
    match message:
        case ChildDone(outcome=outcome):
            body: dict[str, Any] = {
                "result": outcome.result,
                "run_id": outcome.run_id,
                "status": str(outcome.status),
                "usage": {
                    "input_tokens": outcome.usage.total_input_tokens,
                    "output_tokens": outcome.usage.output_tokens,
                },
            }
            if outcome.error is not None:
                body["error"] = outcome.error
            return to_json(body), not outcome.ok
        case MailAck(mail_id=mail_id, recipient=to, error=error, recipients=recipients):
            if error is not None:
                return error, True
            if recipients is not None:  # a topic's: a mail to each subscriber
                return to_json(
                    {"to": to, "mail_id": mail_id, "recipients": list(recipients)}
                ), False
            return to_json({"mail_id": mail_id, "to": to}), False
        case StopReply(stopped=stopped, error=error):
            return (
                (error, True) if error is not None else (to_json({"stopped": list(stopped)}), False)
            )


def to_json(value: Any) -> str:
    return msgspec.json.encode(value).decode()
