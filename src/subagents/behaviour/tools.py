"""The runtime's own tools for LLM agents (spawn, mail, stop, skills), and user tools.

``Tool`` and ``ToolError`` live in ``subagents.tools.base`` (one kind of thing for user,
built-in and MCP tools) and are re-exported here for the code that imported them from here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from subagents.behaviour.fan_out_tool import FAN_OUT
from subagents.behaviour.spawn_arguments import POLICY_PROPERTIES
from subagents.behaviour.status_tool import STATUS, STATUS_SCHEMA
from subagents.definitions.spec import AgentSpec
from subagents.messages import ToolSchema
from subagents.tools.base import Tool, ToolError, ToolResult

SPAWN = "spawn_subagent"
TASK = "Task"
"""Claude Code's name and schema for spawning (``description``, ``prompt``,
``subagent_type``): the same spawn as ``spawn_subagent``, for prompts written for Claude Code."""
SEND = "send_message"
CHECK = "check_mailbox"
WAIT = "wait_for_message"
STOP = "stop_subagent"
LOAD_SKILL = "load_skill"
SUBSCRIBE = "subscribe"
UNSUBSCRIBE = "unsubscribe"
RUNTIME_TOOLS = (
    SPAWN,
    TASK,
    SEND,
    CHECK,
    WAIT,
    STOP,
    LOAD_SKILL,
    FAN_OUT,
    SUBSCRIBE,
    UNSUBSCRIBE,
    STATUS,
)
"""The runtime's own tools (LLM agents are offered those their definition allows)."""


def runtime_tool_names(tools: Iterable[str] = ()) -> frozenset[str]:
    """Every tool a runtime has, by name: its own (spawn, mail, stop, skills, fan_out) and
    ``tools``, the names of the tools its other parts bring (the built-in tools of
    ``subagents.tools``, the user's, MCP servers'). Assembled from the runtime's parts rather
    than kept as one list, so a part's tools count as soon as the runtime holds them;
    definitions' ``tools`` are checked against it (``validate.known_tools``)."""
    return frozenset((*RUNTIME_TOOLS, *tools))


__all__ = [
    "RUNTIME_TOOLS",
    "Tool",
    "ToolError",
    "ToolResult",
    "as_tools",
    "runtime_tool_names",
    "spawn_schema",
    "task_schema",
]


def as_tools(items: Iterable[Tool | Callable[..., Any]]) -> dict[str, Tool]:
    """User tools by name (functions made into Tools); a runtime tool's name is refused."""
    tools: dict[str, Tool] = {}
    for item in items:
        tool = item if isinstance(item, Tool) else Tool.from_function(item)
        if tool.name in RUNTIME_TOOLS:
            raise ValueError(f"tool name {tool.name!r} is reserved for the runtime")
        tools[tool.name] = tool
    return tools


def spawn_schema(dispatchable: Sequence[AgentSpec]) -> ToolSchema:
    listing = "\n".join(f"- {s.name}: {_one_line(s.description)}" for s in dispatchable)
    return ToolSchema(
        name=SPAWN,
        description=(
            "Start a subagent on a task. Foreground (default): its result comes back as this"
            " tool's result, as {result, run_id, status, usage}. Several calls in one turn run"
            " in parallel. Background: returns {run_id} at once; the outcome arrives later as"
            f" mail.\nAgents you may dispatch:\n{listing}"
        ),
        input_schema={
            "type": "object",
            "properties": {
                "agent": {"type": "string", "enum": [s.name for s in dispatchable]},
                "task": {"type": "string", "description": "What the subagent must do."},
                "context": {"type": "string", "description": "Background it needs."},
                "background": {"type": "boolean", "default": False},
                "detach": {
                    "type": "boolean",
                    "default": False,
                    "description": (
                        "Let it outlive you (implies background): it is not cancelled when"
                        " you end; its outcome then goes, as mail, to whoever started you"
                        " (if still running), and is kept in the store either way."
                    ),
                },
                "model": {"type": "string", "description": "Model override (alias or id)."},
                "timeout": {"type": "number", "description": "Seconds before it times out."},
                "label": {"type": "string"},
                "continue_run": {
                    "type": "string",
                    "description": (
                        "The run_id of an ended run of your tree (one you spawned earlier) to"
                        " go on with: the new run starts with that run's conversation, then"
                        " `task` as its next message. `agent` must be that run's agent."
                    ),
                },
                **POLICY_PROPERTIES,
            },
            "required": ["agent", "task"],
        },
    )


def task_schema(dispatchable: Sequence[AgentSpec]) -> ToolSchema:
    """Claude Code's ``Task`` tool: its three fields (and its optional ``model`` and
    ``run_in_background``), on the runtime's spawn path."""
    listing = "\n".join(f"- {s.name}: {_one_line(s.description)}" for s in dispatchable)
    return ToolSchema(
        name=TASK,
        description=(
            "Launch a new agent to handle complex, multi-step tasks autonomously.\n\n"
            f"Available agent types and the tools they have access to:\n{listing}\n\n"
            "When using the Task tool, you must specify a subagent_type parameter to select"
            " which agent type to use. Launch multiple agents concurrently whenever possible"
            " (several tool uses in one message). When the agent is done, it returns a single"
            " message back to you. Each agent invocation is stateless: your prompt should"
            " contain a highly detailed task description and say exactly what information"
            " the agent should return."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "description": {
                    "type": "string",
                    "description": "A short (3-5 word) description of the task",
                },
                "prompt": {"type": "string", "description": "The task for the agent to perform"},
                "subagent_type": {
                    "type": "string",
                    "enum": [s.name for s in dispatchable],
                    "description": "The type of specialized agent to use for this task",
                },
                "model": {"type": "string", "description": "Model override (alias or id)."},
                "run_in_background": {
                    "type": "boolean",
                    "description": "Start it and return at once; its outcome arrives as mail.",
                },
                "resume": {
                    "type": "string",
                    "description": (
                        "Optional run_id of an earlier agent (of this subagent_type) to resume:"
                        " it continues with its full previous conversation, then `prompt`."
                    ),
                },
            },
            "required": ["description", "prompt", "subagent_type"],
        },
    )


RUNTIME_SCHEMAS: dict[str, ToolSchema] = {
    SEND: ToolSchema(
        name=SEND,
        description=(
            "Send mail to another run of your tree: `to` is a run id or an agent name, or"
            " `topic:NAME` for every run of your tree subscribed to NAME (`subscribe`). The"
            " recipient sees it at its next step. Returns the mail id."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "to": {"type": "string"},
                "content": {"type": "string"},
                "reply_to": {"type": "string", "description": "The mail id you answer."},
            },
            "required": ["to", "content"],
        },
    ),
    CHECK: ToolSchema(
        name=CHECK,
        description="Read the mail that has arrived for you and not been shown yet.",
        input_schema={"type": "object", "properties": {}},
    ),
    WAIT: ToolSchema(
        name=WAIT,
        description="Wait until mail arrives (or the timeout, in seconds, passes) and read it.",
        input_schema={
            "type": "object",
            "properties": {"timeout": {"type": "number", "default": 30}},
        },
    ),
    STOP: ToolSchema(
        name=STOP,
        description="Stop one of your own subagents (and everything it started) by run id.",
        input_schema={
            "type": "object",
            "properties": {"run_id": {"type": "string"}},
            "required": ["run_id"],
        },
    ),
    SUBSCRIBE: ToolSchema(
        name=SUBSCRIBE,
        description=(
            "Subscribe to a topic of your tree: mail that runs of your tree send to"
            " `topic:NAME` from now on reaches you (earlier mail does not), until you"
            " unsubscribe or end."
        ),
        input_schema={
            "type": "object",
            "properties": {"topic": {"type": "string", "description": "NAME, e.g. reviews"}},
            "required": ["topic"],
        },
    ),
    UNSUBSCRIBE: ToolSchema(
        name=UNSUBSCRIBE,
        description="Stop receiving the mail sent to `topic:NAME`.",
        input_schema={
            "type": "object",
            "properties": {"topic": {"type": "string"}},
            "required": ["topic"],
        },
    ),
    LOAD_SKILL: ToolSchema(
        name=LOAD_SKILL,
        description="Load the full text of a skill by name.",
        input_schema={
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "required": ["name"],
        },
    ),
    STATUS: STATUS_SCHEMA,
}


def _one_line(text: str, limit: int = 200) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"
