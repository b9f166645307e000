"""``subagent_status``: a model asks where a run of its tree is, without waiting for it.

Why a tool of its own (beside the runtime's others in ``tools.py``): it is the one runtime
tool answered by an ask of the supervisor at once (``AgentPort.ask_status``, a
``StatusOf``), neither a request whose answer comes later as a message (spawn, stop) nor
something the run holds itself (its mailbox). Function agents ask the same through
``ctx.status``; the outside through ``Runtime.status``.
"""

from __future__ import annotations

from typing import Any

import msgspec

from subagents.behaviour.port import AgentPort
from subagents.messages import ToolSchema
from subagents.tools.base import ToolError

STATUS = "subagent_status"

STATUS_SCHEMA = ToolSchema(
    name=STATUS,
    description=(
        "Where a run of your tree is now, without waiting for it (a subagent you started in"
        " the background, say): its status, steps taken, its last tool call, tokens and cost"
        " so far, how much of its mail it has not read, and the end of what its model is"
        " writing right now. Returns JSON."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "run_id": {"type": "string", "description": "The run's id (as spawn returned it)."}
        },
        "required": ["run_id"],
    },
)


def status_answer(port: AgentPort, args: dict[str, Any]) -> tuple[str, bool]:
    """The tool's result: the run's ``RunProgress`` as JSON, or why there is none (an error
    result: no such run, or one of another tree)."""
    run_id = args.get("run_id")
    if not isinstance(run_id, str) or not run_id.strip():
        raise ToolError("missing or empty required argument 'run_id'")
    run_id = run_id.strip()
    try:
        progress = port.ask_status(run_id)
    except ValueError as exc:
        return str(exc), True
    return msgspec.json.encode(progress).decode(), False
