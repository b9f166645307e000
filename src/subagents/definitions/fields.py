"""Fields: turn a loose mapping of frontmatter values into ``AgentSpec`` keyword arguments.

Authors write ``maxTurns``, ``max_turns`` or ``max-turns``; ``tools`` as a comma string or a
list; numbers as strings. This module is the one place that knows each field's accepted
shapes, normalises them to the spec's types, and says precisely which field and value were
wrong otherwise. Keys it does not know are kept, unchanged, as metadata.
"""

from __future__ import annotations

import datetime
import difflib
import re
from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from subagents.definitions.errors import DefinitionError
from subagents.definitions.spec import RESTART_POLICIES, AgentSpec
from subagents.messages.mail import topic_problem
from subagents.messages.records import CLEANUPS, ON_FAILURE

_PROVENANCE = {"source", "category", "level", "metadata", "prompt", "additions"}
_CAMEL_TO_FIELD: dict[str, str] = {
    f.encode_name: f.name for f in msgspec.structs.fields(AgentSpec) if f.name not in _PROVENANCE
}
_LIST_ENCODED: list[Any] = []  # filled below, once LIST_FIELDS is known
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|sec|m|min|h)?\s*$", re.IGNORECASE)
_UNITS = {None: 1.0, "ms": 0.001, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}
_INT = re.compile(r"^\s*[-+]?\d[\d_]*\s*$")


class FieldError(DefinitionError):
    """A value that does not fit its field; ``key`` is the key as the author wrote it."""

    def __init__(self, key: str, reason: str) -> None:
        self.key = key
        super().__init__(reason)


def camel(key: str) -> str:
    """``max_turns`` / ``max-turns`` / ``maxTurns`` -> ``maxTurns``."""
    if "_" not in key and "-" not in key:
        return key
    head, *rest = re.split(r"[_-]+", key)
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def field_of(key: str) -> str | None:
    """The ``AgentSpec`` field a frontmatter key sets, or None for metadata."""
    return _CAMEL_TO_FIELD.get(camel(key))


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _text(key: str, value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        raise FieldError(key, f"{key} must be text, got {_show(value)}")
    if isinstance(value, int | float | datetime.date):
        return str(value)
    raise FieldError(key, f"{key} must be text, got a {type(value).__name__}: {_show(value)}")


def _names(key: str, value: Any) -> tuple[str, ...] | None:
    """A comma string or a list of names -> a tuple without blanks or duplicates."""
    if value is None:
        return None
    if isinstance(value, str):
        items: list[Any] = [value]
    elif isinstance(value, list | tuple):
        items = list(value)
    else:
        raise FieldError(
            key, f"{key} must be a comma-separated string or a list, got {_show(value)}"
        )
    names: list[str] = []
    for item in items:
        if not isinstance(item, str) or isinstance(item, bool):
            raise FieldError(key, f"{key} entries must be names (text), got {_show(item)}")
        for part in _split_names(item):
            part = part.strip()
            if part and part not in names:
                names.append(part)
    return tuple(names)


def _split_names(text: str) -> list[str]:
    """Split on commas outside parentheses: ``Agent(a, b), Read`` is two entries (Claude
    Code's ``Agent(type)`` / ``Bash(git diff:*)`` forms may hold commas)."""
    parts: list[str] = []
    depth, start = 0, 0
    for i, char in enumerate(text):
        if char == "(":
            depth += 1
        elif char == ")" and depth:
            depth -= 1
        elif char == "," and not depth:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def _int(key: str, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and _INT.match(value):
        return int(value.replace("_", ""))
    raise FieldError(key, f"{key} must be a whole number, got {_show(value)}")


def _seconds(key: str, value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        match = _DURATION.match(value)
        if match:
            unit = match.group(2).lower() if match.group(2) else None
            return float(match.group(1)) * _UNITS[unit]
    raise FieldError(
        key, f"{key} must be a number of seconds (or like '90s', '5m', '1h'), got {_show(value)}"
    )


def _bool(key: str, value: Any) -> bool:
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "yes", "on", "1"):
        return True
    if isinstance(value, str) and value.strip().lower() in ("false", "no", "off", "0", ""):
        return False
    raise FieldError(key, f"{key} must be true or false, got {_show(value)}")


def _network(key: str, value: Any) -> str | None:
    """``on``/``off``; YAML reads a bare ``on``/``off`` as true/false, taken back here."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, str) and value.strip().lower() in ("on", "off"):
        return value.strip().lower()
    raise FieldError(key, f"{key} must be on or off, got {_show(value)}")


def _priority(key: str, value: Any) -> int | str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise FieldError(key, f"{key} must be a whole number or a word, got {_show(value)}")


def _capabilities(key: str, value: Any) -> tuple[str, ...] | dict[str, Any]:
    if isinstance(value, dict):
        return {str(k): v for k, v in value.items()}
    return _names(key, value) or ()


def _restart(key: str, value: Any) -> str:
    if value is None:
        return "temporary"
    if isinstance(value, str) and value.strip().lower() in RESTART_POLICIES:
        return value.strip().lower()
    raise FieldError(key, f"restart must be 'temporary' or 'transient', got {_show(value)}")


def _choice(key: str, value: Any, choices: tuple[str, ...]) -> str | None:
    """One of ``choices`` (case and ``-``/``_`` insensitive), with a did-you-mean."""
    if value is None:
        return None
    if isinstance(value, str):
        word = value.strip().lower().replace("-", "_")
        if word in choices:
            return word
        close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
    else:
        hint = ""
    raise FieldError(key, f"{key} must be one of {', '.join(choices)}, got {_show(value)}{hint}")


def _on_failure(key: str, value: Any) -> str | None:
    return _choice(key, value, ON_FAILURE)


def _cleanup(key: str, value: Any) -> str | None:
    return _choice(key, value, CLEANUPS)


def _number(key: str, value: Any) -> float | None:
    """A number (or a numeric string: ``"0.50"``); its range is ``validate``'s business."""
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip().lstrip("$"))
        except ValueError:
            pass
    raise FieldError(key, f"{key} must be a number, got {_show(value)}")


def _maybe_bool(key: str, value: Any) -> bool | None:
    return None if value is None else _bool(key, value)


def _model(key: str, value: Any) -> str | None:
    text = _text(key, value)
    return text.strip() or None if text is not None else None


def _any(key: str, value: Any) -> Any:
    return value


def _tuple(key: str, value: Any) -> tuple[str, ...]:
    return _names(key, value) or ()


def _topics(key: str, value: Any) -> tuple[str, ...]:
    names = _tuple(key, value)
    for name in names:
        problem = topic_problem(name)
        if problem is not None:
            raise FieldError(key, f"{key}: {problem}")
    return names


_COERCE: dict[str, Callable[[str, Any], Any]] = {
    "name": _text,
    "description": _text,
    "tools": _names,
    "disallowed_tools": _tuple,
    "model": _model,
    "skills": _tuple,
    "max_turns": _int,
    "color": _text,
    "permission_mode": _text,
    "mcp_servers": _any,
    "hooks": _any,
    "memory": _any,
    "background": _bool,
    "network": _network,
    "effort": _text,
    "initial_prompt": _text,
    "type": _text,
    "tier": _int,
    "scope": _text,
    "capabilities": _capabilities,
    "priority": _priority,
    "key_sub_agents": _tuple,
    "extends": _text,
    "max_depth": _int,
    "max_children": _int,
    "timeout": _seconds,
    "token_budget": _int,
    "restart": _restart,
    "max_restarts": _int,
    "restart_period": _seconds,
    "restart_backoff": _seconds,
    "restart_backoff_max": _seconds,
    "on_failure": _on_failure,
    "max_retries": _int,
    "cost_budget": _number,
    "shared_context": _names,
    "inherit_messages": _maybe_bool,
    "cleanup": _cleanup,
    "topics": _topics,
}
assert set(_COERCE) == set(_CAMEL_TO_FIELD.values()), "every AgentSpec field needs a coercer"

LIST_FIELDS = (
    "tools", "disallowed_tools", "skills", "key_sub_agents", "shared_context", "topics"
)  # fmt: skip
"""The list fields: a child's replaces its parent's (``extends``); ``+field`` adds to it."""
ADD_PREFIX = "+"
_LIST_ENCODED.extend(f for f in msgspec.structs.fields(AgentSpec) if f.name in LIST_FIELDS)


def spec_kwargs(
    data: Mapping[str, Any], errors: list[FieldError] | None = None
) -> tuple[dict[str, Any], dict[str, Any], dict[str, str]]:
    """(keyword arguments for AgentSpec, metadata, field -> key as written); raises FieldError,
    or, given ``errors``, adds each bad field's error there and leaves the field out (so a
    file's every problem can be reported, not just its first)."""
    kwargs: dict[str, Any] = {}
    written: dict[str, str] = {}
    metadata: dict[str, Any] = {}
    additions: dict[str, tuple[str, ...]] = {}
    for raw_key, value in data.items():
        key = str(raw_key)
        if key.startswith(ADD_PREFIX) and len(key) > 1:
            try:
                additions.update(_addition(key, value))
            except FieldError as exc:
                if errors is None:
                    raise
                errors.append(exc)
            continue
        field = field_of(key)
        if field is None:
            if key == "metadata" and isinstance(value, dict):
                for meta_key, meta_value in value.items():
                    metadata.setdefault(str(meta_key), meta_value)
            else:
                metadata[key] = value
            continue
        try:
            coerced = _COERCE[field](key, value)
            if field in kwargs and kwargs[field] != coerced:
                raise FieldError(
                    key,
                    f"both {written[field]!r} and {key!r} are given, with different values;"
                    " keep one",
                )
        except FieldError as exc:
            if errors is None:
                raise
            errors.append(exc)
            continue
        kwargs[field] = coerced
        written.setdefault(field, key)
    for field in ("disallowed_tools", "skills", "key_sub_agents", "capabilities"):
        if kwargs.get(field) is None:
            kwargs.pop(field, None)
    if additions:
        kwargs["additions"] = additions
    return kwargs, metadata, written


def _addition(key: str, value: Any) -> dict[str, tuple[str, ...]]:
    """``+tools: Write`` -> ``{"tools": ("Write",)}``; only list fields can be added to."""
    field = field_of(key[len(ADD_PREFIX) :])
    if field not in LIST_FIELDS:
        lists = ", ".join(f"+{f.encode_name}" for f in _LIST_ENCODED)
        raise FieldError(key, f"{key}: only list fields can be added to ({lists})")
    return {field: _names(key, value) or ()}
