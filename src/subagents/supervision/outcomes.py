"""How a run ends, as data: the ``End`` a part asks for, the ``Outcome`` it comes to, what
its end event says, what a background child's parent is mailed.

Why apart from ``lifecycle``: the one ``finish`` and the runtime's close (``closing``) end
runs the same way, and must say so in the same words (the outcome, the end event's data).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from subagents.messages import EventKind, Outcome, RunRecord, RunStatus, Usage
from subagents.supervision.transitions import Move


class End(msgspec.Struct, frozen=True, gc=False):
    """How a run ends: the move that ends it (its terminal status is the lifecycle table's),
    its result or error; ``below``: why its live descendants are cancelled (default: its
    parent ended); ``unread``: mail its agent says it had not read. A ``Struct``, not a
    frozen dataclass: made in C, where the dataclass's ``__init__`` set each of its seven
    fields through ``object.__setattr__`` (every run's end makes one)."""

    move: Move
    error_kind: str | None = None
    error: str | None = None
    result: str | None = None
    below: str | None = None
    unread: Sequence[str] = ()
    typed: bool = False
    """``result`` is the JSON text of a function agent's value (``Outcome.value``)."""


def outcome_of(record: RunRecord, status: RunStatus, end: End) -> Outcome:
    """The outcome of ``record``'s run ending in ``status`` as ``end`` says."""
    return Outcome(
        run_id=record.run_id,
        status=status,
        result=end.result,
        error_kind=end.error_kind,
        error=end.error,
        usage=record.usage,
        steps=record.steps,
        typed=end.typed,
    )


def end_event(record: RunRecord, status: RunStatus, end: End) -> tuple[EventKind, dict[str, Any]]:
    """The event ``record``'s run ends with in ``status``: its kind (the status's name) and
    its data (the error, and what the run spent)."""
    data = {
        "error_kind": end.error_kind,
        "error": end.error,
        "steps": record.steps,
        "tool_calls": record.tool_calls,
        "usage": usage_data(record.usage),
    }
    return _END_KINDS[status], data


_END_KINDS = {status: EventKind(status.value) for status in RunStatus if status.terminal}
"""The end event of each terminal status (the status's name), looked up, not made per end."""


def usage_data(usage: Usage) -> dict[str, Any]:
    """A run's usage as an end event carries it: plain JSON data (the event is kept by the
    store and read back as JSON), every counter of ``Usage`` by name."""
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_creation_input_tokens": usage.cache_creation_input_tokens,
        "cache_read_input_tokens": usage.cache_read_input_tokens,
        "cost_usd": usage.cost_usd,
        "model_calls": usage.model_calls,
    }


REPORT_KINDS = ("background result", "detached result")
"""The kinds of ``background_report``: a background child's, and a detached child's mailed to
an ancestor after its parent ended."""


def background_report(record: RunRecord, outcome: Outcome, kind: str = "background result") -> str:
    """What a background child's parent is mailed when it ends (``kind``: "detached
    result" for a detached child that ended after its parent, mailed to an ancestor; it
    names the parent that started it)."""
    fields = {
        "run_id": record.run_id,
        "agent": record.agent,
        "status": str(outcome.status),
        "result": outcome.result,
        "error": outcome.error,
    }
    if record.detached:
        fields["parent_run_id"] = record.parent_run_id
    return f"[{kind}] {msgspec.json.encode(fields).decode()}"
