"""The built-in tools, by name: what an LLM agent gets unless its ``tools`` narrows it."""

from __future__ import annotations

from subagents.tools import (
    ask_user,
    bash,
    edit,
    globbing,
    grep,
    ls,
    notebook,
    plan_mode,
    read,
    todo,
    web_fetch,
    write,
)
from subagents.tools.base import Tool


def builtin_tools() -> dict[str, Tool]:
    """Claude Code's file and shell tools and its todo list, in the order a model is shown
    them."""
    tools = (
        read.TOOL,
        write.TOOL,
        edit.EDIT,
        edit.MULTI_EDIT,
        globbing.TOOL,
        grep.TOOL,
        ls.TOOL,
        bash.BASH,
        bash.BASH_OUTPUT,
        bash.KILL_SHELL,
        notebook.TOOL,
        todo.TOOL,
        plan_mode.TOOL,
        web_fetch.TOOL,
        ask_user.TOOL,
    )
    return {tool.name: tool for tool in tools}


BUILTIN_NAMES = frozenset(builtin_tools())
