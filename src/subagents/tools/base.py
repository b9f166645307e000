"""Tool: one kind of thing for every tool a model may call (user, built-in, MCP).

A tool has a name, a description, a JSON schema of its input and a ``run(arguments, ctx)``
that returns text for the model (or a ``ToolResult`` when it must say ``is_error`` itself).
Flags tell the runtime what calling it may do, because the runtime decides on them:

- ``read_only``: changes nothing outside the run. Allowed in ``plan`` mode; after a crash a
  read-only call that started and never finished simply runs again.
- ``idempotent``: running it twice has the effect of running it once, so a call interrupted
  by a crash may run again too (a user tool declares it; side effects are assumed otherwise).
- ``needs_approval``: where Claude Code would ask a person before calling it (Write, Edit,
  Bash...). User tools were handed to the runtime by its owner and do not ask.
- ``edits_files``: a file edit, which ``acceptEdits`` mode allows without asking.

A tool raises ``ToolError`` for a failure the model should see and handle (an ``is_error``
result); any other exception from a user tool fails the run. A user tool's schema comes from
its signature: the parameters become a msgspec Struct (``msgspec.defstruct``) whose schema is
what the model sees and whose decoder validates what the model sends back.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar, get_type_hints

import msgspec

from subagents.messages import Attachment, ToolSchema
from subagents.tools.context import ToolContext
from subagents.tools.errors import ToolError as ToolError  # its home before tools/errors.py


class ToolResult(msgspec.Struct, frozen=True):
    """What a tool gives back when plain text is not enough: the text, whether it is an
    error the model should see as one (Bash's non-zero exit, for instance), and what it
    shows besides the text (images)."""

    content: str
    is_error: bool = False
    attachments: tuple[Attachment, ...] = ()
    """Images or PDFs for the model to see after ``content`` (Read of a PNG, a notebook)."""


ToolOutput = str | ToolResult
Runner = Callable[[Mapping[str, Any], "ToolContext | None"], ToolOutput]


@dataclass(frozen=True)
class Tool:
    """A tool the model may call by name: its schema, how to run it, and what it may do."""

    name: str
    description: str
    input_schema: dict[str, Any]
    run: Runner
    read_only: bool = False
    idempotent: bool = False
    needs_approval: bool = False
    edits_files: bool = False
    starts_processes: bool = True
    """Whether a call may start a process the run chooses (a command, a program, a server):
    counted when deciding whether the run store must be out of the runs' reach
    (``runtime._store_reach.starts_processes``). True unless the tool says otherwise, so a
    tool nobody vouched for counts; the built-ins but ``Bash`` say False."""
    fn: Callable[..., Any] | None = field(default=None, compare=False)
    """The Python function behind a tool made with ``from_function`` (None otherwise)."""
    params: type[msgspec.Struct] | None = field(default=None, compare=False)
    """The Struct its input is decoded into, when it has one."""

    @classmethod
    def from_function(
        cls,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        read_only: bool = False,
        idempotent: bool = False,
        needs_approval: bool = False,
        starts_processes: bool = True,
    ) -> Tool:
        """Build a tool from ``fn``'s signature, annotations and docstring.
        ``starts_processes=False``: its calls start no process the run chooses (the run
        store may then be in the workspace when no other tool does; docs/tools.md).

        A parameter annotated ``ToolContext`` is not shown to the model: it receives the
        call's context (workspace, cancel signal, deadline, run id, logger)."""
        tool_name = name or fn.__name__
        hints = get_type_hints(fn)
        fields: list[tuple[str, Any] | tuple[str, Any, Any]] = []
        context_param: str | None = None
        for param in inspect.signature(fn).parameters.values():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise TypeError(f"tool {tool_name}: *args/**kwargs cannot be described to a model")
            annotation = hints.get(param.name, Any)
            if annotation is ToolContext:
                context_param = param.name
                continue
            if param.default is inspect.Parameter.empty:
                fields.append((param.name, annotation))
            else:
                fields.append((param.name, annotation, param.default))
        params = msgspec.defstruct(f"{tool_name}_input", fields, forbid_unknown_fields=True)
        doc = description or inspect.getdoc(fn) or f"The {tool_name} tool."

        def run(arguments: Mapping[str, Any], ctx: ToolContext | None) -> ToolOutput:
            decoded = decode_input(tool_name, params, arguments)
            kwargs = {f: getattr(decoded, f) for f in params.__struct_fields__}
            if context_param is not None:
                if ctx is None:
                    raise ToolError(f"tool {tool_name} needs a run's context to be called")
                kwargs[context_param] = ctx
            value = fn(**kwargs)
            if isinstance(value, str | ToolResult):
                return value
            return msgspec.json.encode(value).decode()

        return cls(
            name=tool_name,
            description=doc,
            input_schema=struct_schema(params),
            run=run,
            read_only=read_only,
            idempotent=idempotent or read_only,
            needs_approval=needs_approval,
            starts_processes=starts_processes,
            fn=fn,
            params=params,
        )

    @property
    def schema(self) -> ToolSchema:
        return ToolSchema(
            name=self.name, description=self.description, input_schema=self.input_schema
        )

    @property
    def side_effects(self) -> bool:
        """Whether running it twice could do something twice (journaled before it runs)."""
        return not (self.read_only or self.idempotent)

    def call(self, arguments: Mapping[str, Any], ctx: ToolContext | None = None) -> str:
        """Run the tool; its text. ``ToolError`` for bad input or a result marked as error."""
        out = self.run(arguments, ctx)
        if isinstance(out, ToolResult):
            if out.is_error:
                raise ToolError(out.content)
            return out.content
        return out


S = TypeVar("S", bound=msgspec.Struct)


def decode_input(tool: str, params: type[S], arguments: Mapping[str, Any]) -> S:
    """The model's arguments as ``params``, or a ToolError naming what was wrong."""
    try:
        return msgspec.convert(dict(arguments), params)
    except msgspec.ValidationError as exc:
        raise ToolError(f"invalid input for {tool}: {exc}") from None


def need_context(tool: str, ctx: ToolContext | None) -> ToolContext:
    """Built-in tools work inside a run: they need its context."""
    if ctx is None:
        raise ToolError(f"tool {tool} needs a run's context (workspace, cancel signal)")
    return ctx


def struct_schema(params: type[msgspec.Struct]) -> dict[str, Any]:
    """The JSON schema of a Struct as one self-contained object: msgspec puts Structs under
    ``$defs`` and refers to them; they are inlined here (no tool input is recursive), since
    not every model API follows ``$ref``."""
    raw = msgspec.json.schema(params)
    defs: dict[str, Any] = raw.get("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                body = dict(defs[ref.rsplit("/", 1)[-1]])
                body.pop("title", None)
                return inline(body)
            return optional(node, {k: inline(v) for k, v in node.items()})
        if isinstance(node, list):
            return [inline(v) for v in node]
        return node

    def optional(original: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
        """``X | None = None`` is "optional X" to a model: not a nullable type. (A model
        that sends null anyway is still accepted by the decoder.)"""
        variants = node.get("anyOf")
        if "default" in original and original["default"] is None and isinstance(variants, list):
            kept = [v for v in variants if v != {"type": "null"}]
            if len(kept) == 1 and len(variants) == 2:
                merged = {k: v for k, v in node.items() if k not in ("anyOf", "default")}
                merged.update(kept[0])
                return merged
        return node

    body = inline({k: v for k, v in raw.items() if k != "$defs"})
    assert isinstance(body, dict)
    body.pop("title", None)
    return body
