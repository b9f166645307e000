"""Tools an LLM agent can call: the Tool type, the workspace, Claude Code's built-in tools,
permissions and approvals, hooks, and the journal that keeps a crash from redoing a call.

Layering: below ``behaviour/`` (whose LLM loop runs every call through one path) and above
``models/``, ``definitions/`` and ``messages``; pure decisions (permissions, journal, hook
outcomes) are plain classes without threads.
"""

from subagents.tools.base import Tool, ToolError, ToolResult
from subagents.tools.context import RunSession, ToolContext
from subagents.tools.workspace import Workspace

__all__ = ["RunSession", "Tool", "ToolContext", "ToolError", "ToolResult", "Workspace"]
