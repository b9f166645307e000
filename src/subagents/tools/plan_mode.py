"""ExitPlanMode: Claude Code's way for a model in plan mode to present its plan and leave.

As in Claude Code the plan is put to whoever approves the run's calls (here the run's
approver: its parent with ``ask_parent``, else the runtime's approval handler), and an
approved plan ends plan mode: the run goes on in the mode it would have outside plan mode,
never wider than its requesters allow (``behaviour.plan_exit``, applied by
``behaviour.tool_calls.ToolCalls``, which answers the call). Denied, or held in plan mode by a
requester, the model is told so and stays in plan mode. This module is the tool itself: its
input, and the check that there is a plan.
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
    return "Your plan was approved."  # the run's ToolCalls answers, naming the new mode


TOOL = Tool(
    name=NAME,
    starts_processes=False,
    description=DESCRIPTION,
    input_schema=struct_schema(ExitPlanModeInput),
    run=run,
    read_only=True,
    idempotent=True,
    params=ExitPlanModeInput,
)
