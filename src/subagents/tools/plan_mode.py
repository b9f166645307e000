"""ExitPlanMode: Claude Code's way for a model in plan mode to hand over its plan.

In Claude Code the person then approves the plan and the session leaves plan mode. Here a run's
permission mode is its owner's decision (the runtime's configuration, which a definition may
only tighten: docs/tools.md), so a model cannot loosen it: the call is accepted (read-only, so
plan mode allows it), the plan is kept in the run's conversation and events like any call, and
the answer tells the model to end its turn with the plan, which is what its requester (a
parent agent, or the caller of ``rt.run``) receives and acts on, as with Claude Code's Plan
subagent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

import msgspec

from subagents.tools.base import Tool, ToolError, decode_input, struct_schema

NAME = "ExitPlanMode"


class ExitPlanModeInput(msgspec.Struct):
    plan: Annotated[
        str,
        msgspec.Meta(
            description="The plan you came up with, that you want the user to approve."
            " Supports markdown. The plan should be pretty concise."
        ),
    ]


DESCRIPTION = """Use this tool when you are in plan mode and have finished planning the
implementation steps of a task that requires writing code, to present your plan. Do not use it
for research tasks (searching, reading files, understanding the codebase)."""


def run(arguments: Mapping[str, Any], ctx: object) -> str:
    args = decode_input(NAME, ExitPlanModeInput, arguments)
    if not args.plan.strip():
        raise ToolError("plan is empty: write the plan you want approved")
    return (
        "Your plan is recorded. This runtime does not leave plan mode on a model's request: the"
        " permission mode is set by whoever runs you. End your turn now with the plan as your"
        " final answer; your requester will approve it and have it carried out."
    )


TOOL = Tool(
    name=NAME,
    description=DESCRIPTION,
    input_schema=struct_schema(ExitPlanModeInput),
    run=run,
    read_only=True,
    idempotent=True,
    params=ExitPlanModeInput,
)
