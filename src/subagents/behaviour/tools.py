"""Tools: the runtime's own tools for LLM agents, and user tools made from Python callables.

A user tool's JSON schema comes from its signature: the parameters become a msgspec Struct
(``msgspec.defstruct``), whose schema is what the model sees and whose decoder validates
what the model sends back. A tool raises ``ToolError`` for a failure the model should see and
handle (an ``is_error`` tool result); any other exception is a crash of the run.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, get_type_hints

import msgspec

from subagents.behaviour.fanout import FAN_OUT
from subagents.definitions.spec import AgentSpec
from subagents.messages import ToolSchema

SPAWN = "spawn_subagent"
SEND = "send_message"
CHECK = "check_mailbox"
WAIT = "wait_for_message"
STOP = "stop_subagent"
LOAD_SKILL = "load_skill"
RUNTIME_TOOLS = (SPAWN, SEND, CHECK, WAIT, STOP, LOAD_SKILL, FAN_OUT)
"""The runtime's own tools (LLM agents are offered those their definition allows)."""


def runtime_tool_names(tools: Iterable[str] = ()) -> frozenset[str]:
    """Every tool a runtime with the user tools ``tools`` has, by name: its own (spawn,
    mail, stop, skills, fan_out) and the user's. Assembled from the runtime's parts rather
    than kept as one list, so a part that brings tools (built-in tools, MCP servers) counts
    as soon as it is added here; definitions' ``tools`` are checked against it."""
    return frozenset((*RUNTIME_TOOLS, *tools))


class ToolError(Exception):
    """A tool failed in a way the model should be told about (``is_error`` result)."""


@dataclass(frozen=True)
class Tool:
    """A user tool: a Python callable the model may call by name."""

    name: str
    description: str
    fn: Callable[..., Any]
    params: type[msgspec.Struct]

    @classmethod
    def from_function(
        cls, fn: Callable[..., Any], *, name: str | None = None, description: str | None = None
    ) -> Tool:
        """Build a tool from ``fn``'s signature, annotations and docstring."""
        tool_name = name or fn.__name__
        hints = get_type_hints(fn)
        fields: list[tuple[str, Any] | tuple[str, Any, Any]] = []
        for param in inspect.signature(fn).parameters.values():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise TypeError(f"tool {tool_name}: *args/**kwargs cannot be described to a model")
            annotation = hints.get(param.name, Any)
            if param.default is inspect.Parameter.empty:
                fields.append((param.name, annotation))
            else:
                fields.append((param.name, annotation, param.default))
        params = msgspec.defstruct(f"{tool_name}_input", fields, forbid_unknown_fields=True)
        doc = description or inspect.getdoc(fn) or f"The {tool_name} tool."
        return cls(name=tool_name, description=doc, fn=fn, params=params)

    @property
    def schema(self) -> ToolSchema:
        raw = msgspec.json.schema(self.params)
        ref = raw.get("$ref", "")
        defs = raw.get("$defs", {})
        body = dict(defs.get(ref.rsplit("/", 1)[-1], raw)) if ref else dict(raw)
        body.pop("title", None)
        other_defs = {k: v for k, v in defs.items() if not ref.endswith("/" + k)}
        if other_defs:
            body["$defs"] = other_defs
        return ToolSchema(name=self.name, description=self.description, input_schema=body)

    def call(self, arguments: Mapping[str, Any]) -> str:
        """Validate ``arguments`` against the signature and call the tool; text for the model."""
        try:
            params = msgspec.convert(dict(arguments), self.params)
        except msgspec.ValidationError as exc:
            raise ToolError(f"invalid input for {self.name}: {exc}") from None
        kwargs = {f: getattr(params, f) for f in self.params.__struct_fields__}
        value = self.fn(**kwargs)
        if isinstance(value, str):
            return value
        return msgspec.json.encode(value).decode()


def as_tools(items: Iterable[Tool | Callable[..., Any]]) -> dict[str, Tool]:
    tools: dict[str, Tool] = {}
    for item in items:
        tool = item if isinstance(item, Tool) else Tool.from_function(item)
        if tool.name in RUNTIME_TOOLS:
            raise ValueError(f"tool name {tool.name!r} is reserved for the runtime")
        tools[tool.name] = tool
    return tools


def spawn_schema(dispatchable: Sequence[AgentSpec]) -> ToolSchema:
    from subagents.behaviour.spawn_policy import POLICY_PROPERTIES  # it imports ToolError

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
                "model": {"type": "string", "description": "Model override (alias or id)."},
                "timeout": {"type": "number", "description": "Seconds before it times out."},
                "label": {"type": "string"},
                **POLICY_PROPERTIES,
            },
            "required": ["agent", "task"],
        },
    )


RUNTIME_SCHEMAS: dict[str, ToolSchema] = {
    SEND: ToolSchema(
        name=SEND,
        description=(
            "Send mail to another run of your tree: `to` is a run id or an agent name. The"
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
    LOAD_SKILL: ToolSchema(
        name=LOAD_SKILL,
        description="Load the full text of a skill by name.",
        input_schema={
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "required": ["name"],
        },
    ),
}


def _one_line(text: str, limit: int = 200) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"
