"""A user's tool's answer held to what one tool result may be.

The built-in tools cut their own output (Bash and Grep at 30,000 characters, a file read at
2,000 lines) and an MCP server's result is cut at ``mcp/results.py``'s 100,000 characters, as
Claude Code caps MCP output. A tool given to the runtime in code (``Runtime(tools=[...])``)
had no cap: a function returning 100 MB was journaled, kept in the conversation and sent to
the model whole at every later step, until the model API refused the request and the run
failed far from its cause. Its text is now cut at the same 100,000 characters (about 25,000
tokens), with a note the model reads, saying how much there was and asking for less.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import msgspec

from subagents.tools.base import Runner, Tool, ToolOutput, ToolResult
from subagents.tools.context import ToolContext

USER_RESULT_LIMIT = 100_000
"""Characters of a user tool's answer the model is shown: MCP's cap (``mcp/results.py``)."""


def cut(text: str, limit: int = USER_RESULT_LIMIT) -> str:
    """``text``, or its first ``limit`` characters and a note saying what was left out."""
    if len(text) <= limit:
        return text
    return (
        text[:limit]
        + f"\n\n[output cut: {len(text):,} characters, the first {limit:,} shown; ask the tool"
        " for less, e.g. with a narrower query or a page]"
    )


class CappedRunner:
    """A user tool's runner whose text answer is ``cut``: a class, not a closure, so a tool
    made of module-level parts still pickles."""

    __slots__ = ("runner",)

    def __init__(self, runner: Runner) -> None:
        self.runner = runner

    def __call__(self, arguments: Mapping[str, Any], ctx: ToolContext | None) -> ToolOutput:
        out = self.runner(arguments, ctx)
        if isinstance(out, ToolResult):
            if len(out.content) <= USER_RESULT_LIMIT:
                return out
            return msgspec.structs.replace(out, content=cut(out.content))
        if isinstance(out, str):
            return cut(out)
        return out


def capped(tool: Tool) -> Tool:
    """``tool`` with its answers cut at ``USER_RESULT_LIMIT`` characters."""
    if isinstance(tool.run, CappedRunner):
        return tool
    return dataclasses.replace(tool, run=CappedRunner(tool.run))
