"""What a synthesis reads and produces, and how values are compared.

Why a module of its own: the strategies (``synthesis.py``) and their callers (fan-out, function
agents, ``Runtime.synthesize``) share this vocabulary: an ``Item`` per source, a ``Conflict`` per
disagreement, one ``Synthesis`` as the answer. Keeping the data and the comparison rules apart
from the strategies lets each strategy module read as "how to combine", nothing else.

Values are compared by their canonical JSON (sorted keys), so ``{"a": 1, "b": 2}`` and
``{"b": 2, "a": 1}`` agree, while ``1`` and ``"1"`` or ``1`` and ``true`` do not.
Run results are text; ``parse_value`` reads a result that is JSON as JSON, so agents that
answer with JSON objects or numbers can be merged and averaged; a function agent's typed
value is used as it returned it (``outcome_value``).
"""

from __future__ import annotations

from typing import Any

import msgspec


class SynthesisError(ValueError):
    """A synthesis that cannot run as asked (unknown strategy, missing scorer, bad threshold)."""


class Item(msgspec.Struct, frozen=True, kw_only=True):
    """One input: the value a source produced. ``ok=False`` items are reported, not used."""

    source: str
    value: Any = None
    agent: str = ""
    weight: float = 1.0
    ok: bool = True
    error: str | None = None


class Conflict(msgspec.Struct, frozen=True, kw_only=True):
    """A disagreement: at ``path`` (``$`` is the whole value) the sources gave these values."""

    path: str
    reason: str
    values: tuple[Any, ...] = ()
    sources: tuple[str, ...] = ()


class Synthesis(msgspec.Struct, frozen=True, kw_only=True):
    """The combined value, the conflicts found, the sources used, the inputs that failed."""

    strategy: str
    value: Any = None
    conflicts: tuple[Conflict, ...] = ()
    sources: tuple[str, ...] = ()
    failed: tuple[tuple[str, str], ...] = ()
    error: str | None = None

    @property
    def ok(self) -> bool:
        """True when a value was produced with no conflict and no failed input."""
        return self.error is None and not self.conflicts and not self.failed


def outcome_value(result: str | None, typed: bool) -> Any:
    """The value of a run's result: a function agent's typed value as it returned it (see
    ``Outcome.value``), else the text read as JSON when it is JSON (``parse_value``)."""
    if typed:
        return msgspec.json.decode(result) if result else None
    return parse_value(result)


def parse_value(text: str | None) -> Any:
    """A run's result text as JSON when it is JSON, else the text itself (stripped)."""
    if text is None:
        return None
    stripped = text.strip()
    if not stripped:
        return ""
    try:
        return msgspec.json.decode(stripped)
    except msgspec.DecodeError:
        return stripped


def canonical(value: Any) -> str:
    """The comparison key of a value: JSON with sorted keys (non-JSON values by repr)."""
    try:
        return msgspec.json.encode(value, order="sorted").decode()
    except (TypeError, msgspec.EncodeError):
        return repr(value)


def empty(strategy: str) -> Synthesis:
    """The answer of a strategy given no successful input."""
    return Synthesis(strategy=strategy, error="no successful inputs to synthesize")


def kind(value: Any) -> str:
    """The JSON kind of a value, as conflicts name it (``number``, ``object``, ...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__
