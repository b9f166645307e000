"""TodoWrite: the run's todo list (Claude Code's TodoWrite, same schema and answer).

The model sends the whole list each time; the list is kept with the run by what the runtime
already keeps: the call is a ``tool_call`` event of the run (stored with its events, its input
whole: only long top-level strings are cut) and a tool use in its checkpoint. So the current
list is the input of the run's last valid TodoWrite call (``todos_in``), which ``subagents
info`` and the live tree show, and a resumed run's model has it in its conversation.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Literal

import msgspec

from subagents.messages import Event, EventKind
from subagents.tools.base import Tool, ToolError, decode_input, struct_schema

NAME = "TodoWrite"
NonEmpty = Annotated[str, msgspec.Meta(min_length=1)]


class TodoItem(msgspec.Struct, frozen=True, omit_defaults=True):
    content: Annotated[NonEmpty, msgspec.Meta(description="What is to be done (imperative)")]
    status: Literal["pending", "in_progress", "completed"]
    active_form: (
        Annotated[NonEmpty, msgspec.Meta(description="The same, as it is being done")] | None
    ) = msgspec.field(default=None, name="activeForm")
    id: str | None = None
    """Older Claude Code versions send an id and a priority: accepted, kept, not needed."""
    priority: Literal["high", "medium", "low"] | None = None


class TodoWriteInput(msgspec.Struct, forbid_unknown_fields=True):
    todos: Annotated[list[TodoItem], msgspec.Meta(description="The updated todo list")]


DESCRIPTION = """Use this tool to create and manage a structured task list for your current
session. This helps you track progress, organize complex tasks, and show the progress of your
work. Send the whole list each time (it replaces the previous one). Each task has a content
(imperative: "Run tests"), an activeForm (as it is being done: "Running tests") and a status:
pending, in_progress (one at a time) or completed (mark it as soon as it is done). Use it for
tasks of three steps or more; skip it for a single trivial task."""

ANSWER = (
    "Todos have been modified successfully. Ensure that you continue to use the todo list to"
    " track your progress. Please proceed with the current tasks if applicable"
)


def run(arguments: Mapping[str, Any], ctx: object) -> str:
    args = decode_input(NAME, TodoWriteInput, arguments)
    if len(args.todos) > 200:
        raise ToolError(f"a todo list of {len(args.todos)} items is too long (at most 200)")
    return ANSWER


def todos_in(events: Iterable[Event]) -> tuple[TodoItem, ...] | None:
    """A run's current todo list: the input of its last valid TodoWrite call; None if it
    never wrote one."""
    found: tuple[TodoItem, ...] | None = None
    for event in events:
        listed = todos_of_call(event)
        if listed is not None:
            found = listed
    return found


def todos_of_call(event: Event) -> tuple[TodoItem, ...] | None:
    """The list a ``tool_call`` event of TodoWrite sets, or None (another event, bad input)."""
    if event.kind is not EventKind.TOOL_CALL or event.data.get("tool") != NAME:
        return None
    try:
        return tuple(msgspec.convert(event.data.get("input"), TodoWriteInput).todos)
    except msgspec.ValidationError:
        return None


def progress(todos: tuple[TodoItem, ...]) -> str:
    """``todos 2/5`` and what is being done now: one line for the live tree."""
    done = sum(1 for t in todos if t.status == "completed")
    text = f"todos {done}/{len(todos)}"
    now = next((t for t in todos if t.status == "in_progress"), None)
    if now is not None:
        text += f": {now.active_form or now.content}"
    return text


def checklist(todos: tuple[TodoItem, ...]) -> str:
    """The list as lines: ``[x]`` done, ``[>]`` in progress, ``[ ]`` pending."""
    marks = {"completed": "[x]", "in_progress": "[>]", "pending": "[ ]"}
    return "\n".join(f"{marks[t.status]} {t.content}" for t in todos)


TOOL = Tool(
    name=NAME,
    starts_processes=False,
    description=DESCRIPTION,
    input_schema=struct_schema(TodoWriteInput),
    run=run,
    read_only=True,  # it changes nothing outside the run: allowed in plan mode, unasked
    idempotent=True,
    params=TodoWriteInput,
)
