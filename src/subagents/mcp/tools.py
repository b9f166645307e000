"""A run's MCP tools as ``Tool``s, so they take the one execution path every tool takes
(permissions and approvals, hooks, the journal) like Read or Bash.

What each flag means for an MCP tool, as Claude Code treats them:

- ``read_only`` from the server's ``readOnlyHint``: allowed in ``plan`` mode and without
  asking; after a crash an unfinished call simply runs again.
- ``idempotent`` from ``idempotentHint``: an unfinished call may run again after a crash.
  Any other tool is side-effecting: the journal records it before it runs, and after a crash
  the model is told it was interrupted, never silently repeated.
- ``needs_approval`` unless read-only: Claude Code asks before it calls an MCP tool; here
  the runtime's permissions decide (an allow rule ``mcp__server`` or ``mcp__server__tool``,
  ``acceptEdits`` does not cover them, ``bypassPermissions`` does).

A server that is down, a stop or the run's deadline are ``ToolError``s naming the server:
the model sees them, the run goes on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from subagents.mcp.connection import McpServerError
from subagents.mcp.hub import McpCallError, McpHub, RunMcp
from subagents.mcp.selection import McpTool
from subagents.tools.base import Tool, ToolError, ToolResult
from subagents.tools.context import ToolContext


def as_tool(hub: McpHub, run: RunMcp, mcp_tool: McpTool) -> Tool:
    """One MCP tool of one run, callable through ``hub``."""

    def call(arguments: Mapping[str, Any], ctx: ToolContext | None) -> ToolResult:
        try:
            result = hub.call(
                run,
                mcp_tool.name,
                arguments,
                deadline=ctx.deadline if ctx is not None else None,
                cancel=ctx.cancel if ctx is not None else None,
            )
        except (McpServerError, McpCallError) as exc:
            raise ToolError(str(exc)) from None
        return ToolResult(result.text, is_error=result.is_error)

    return Tool(
        name=mcp_tool.name,
        description=mcp_tool.description,
        input_schema=mcp_tool.input_schema,
        run=call,
        read_only=mcp_tool.read_only,
        idempotent=mcp_tool.idempotent,
        needs_approval=not mcp_tool.read_only,
    )


def as_tools(hub: McpHub, run: RunMcp) -> dict[str, Tool]:
    """Every MCP tool of a run, by name, and the resource tools of its servers."""
    from subagents.mcp.resources import resource_tools

    return {
        **{tool.name: as_tool(hub, run, tool) for tool in run.tools},
        **resource_tools(hub, run),
    }
