"""What a definition lets its agent spawn, read from its frontmatter in one place.

Spawning used to be decided in three places that disagreed (the catalog's check, the LLM
loop's offered tools, admission). The part that depends only on definitions lives here, at
the bottom of the layers so that the catalog can use it; ``supervision.spawn_rules.SpawnRules``
adds the limits (depth) and is what the runtime asks, for every kind of requester.

The rules, in the order they are checked:

1. **The spawn tool.** ``tools`` absent means every tool, spawning included. A ``tools`` list
   enables spawning when it names ``spawn_subagent``, or Claude Code's ``Agent`` / ``Task``
   (any agent), or ``Agent(a, b)`` / ``Task(a)`` (exactly those agents; several entries add
   up). ``disallowedTools`` wins: a bare ``spawn_subagent`` / ``Agent`` / ``Task`` there turns
   spawning off, ``Agent(a)`` there removes ``a``.
2. **Itself.** An agent may not spawn itself unless its definition opts in with
   ``allowSelfSpawn: true`` (or names itself in ``Agent(...)``): a model ignoring the tool's
   enum would otherwise recurse down to the depth limit.
3. **``allowedChildTypes``** (a list or a comma string; ``*`` = any): the child's ``type``,
   or its name, must be listed. An empty list allows no child.

Names and types compare case-insensitively (Claude Code's types are ``Explore``, ``Plan``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from subagents.definitions.spec import AgentSpec

SPAWN_TOOL = "spawn_subagent"
SPAWN_TOOL_NAMES = (SPAWN_TOOL, "Agent", "Task")
"""Our spawn tool and Claude Code's two names for its subagent tool."""
SELF_SPAWN_KEY = "allowSelfSpawn"
CHILD_TYPES_KEY = "allowedChildTypes"

_NAMED = re.compile(r"^\s*(spawn_subagent|Agent|Task)\s*\((.*)\)\s*$", re.DOTALL)
_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0", ""}


class SpawnSettingError(ValueError):
    """A spawn setting of a definition has a value that cannot be read; names the key."""


@dataclass(frozen=True)
class SpawnGrant:
    """What one definition lets its agent spawn (before depth, which needs the limits)."""

    agent: str
    disabled: str | None
    """Why this agent may not spawn at all, or None when it may."""
    names: frozenset[str] | None
    """``Agent(a, b)``: only these agents (lower case); None = any."""
    denied: frozenset[str]
    """``disallowedTools: Agent(a)``: never these (lower case)."""
    types: frozenset[str] | None
    """``allowedChildTypes`` (lower case); None = any."""
    self_spawn: bool
    fan_out: bool
    """The ``fan_out`` tool comes with spawning unless ``disallowedTools`` names it."""

    @classmethod
    def of(cls, spec: AgentSpec) -> SpawnGrant:
        """Read ``spec``'s spawn settings. Raises ``SpawnSettingError`` for a bad value."""
        disabled: str | None = None
        names: set[str] | None = set()
        for entry in spec.disallowed_tools:
            if entry.strip() in SPAWN_TOOL_NAMES:
                disabled = f"{spec.name} may not spawn subagents: its disallowedTools list {entry}"
        denied = frozenset(n for entry in spec.disallowed_tools for n in _named(entry) or ())
        if disabled is None and spec.tools is not None:
            for entry in spec.tools:
                listed = _named(entry)
                if entry.strip() in SPAWN_TOOL_NAMES:
                    names = None  # a bare spawn tool: any agent
                elif listed is not None and names is not None:
                    names.update(listed)
            if names is not None and not names:
                shown = ", ".join(spec.tools) if spec.tools else "none"
                disabled = (
                    f"{spec.name} may not spawn subagents: its tools ({shown}) name none of"
                    " spawn_subagent, Agent, Agent(<name>), Task"
                )
        else:
            names = None
        own = spec.name.lower()
        return cls(
            agent=spec.name,
            disabled=disabled,
            names=frozenset(names) if names is not None else None,
            denied=denied,
            types=child_types(spec.metadata),
            self_spawn=self_spawn_setting(spec.metadata) or (names is not None and own in names),
            fan_out="fan_out" not in spec.disallowed_tools,
        )

    def refusal(self, child: AgentSpec) -> str | None:
        """None when this agent may spawn ``child`` (depth aside), else the rule that says no."""
        if self.disabled is not None:
            return f"spawn rule: {self.disabled}"
        name = child.name.lower()
        if name == self.agent.lower() and not self.self_spawn:
            return (
                f"spawn rule: {self.agent} may not spawn itself (a definition opts in with"
                f" {SELF_SPAWN_KEY}: true)"
            )
        if name in self.denied:
            return f"spawn rule: {self.agent} may not spawn {child.name} (disallowedTools)"
        if self.names is not None and name not in self.names:
            listed = ", ".join(sorted(self.names))
            return (
                f"spawn rule: {self.agent} may only spawn {listed} (tools: Agent({listed}));"
                f" not {child.name}"
            )
        if self.types is not None and "*" not in self.types:
            child_type = (child.type or "").strip().lower()
            if child_type not in self.types and name not in self.types:
                listed = ", ".join(sorted(self.types)) or "none (an empty list)"
                what = f"is of type {child.type!r}" if child_type else "has no type"
                return (
                    f"spawn rule: {self.agent} may only spawn agents of type {listed}"
                    f" ({CHILD_TYPES_KEY}); {child.name} {what}"
                )
        return None


def _named(entry: str) -> tuple[str, ...] | None:
    """``Agent(a, b)`` -> ("a", "b") (lower case); None when ``entry`` is not of that form."""
    match = _NAMED.match(entry)
    if match is None:
        return None
    return tuple(p.strip().lower() for p in match.group(2).split(",") if p.strip())


@functools.cache
def _spellings(key: str) -> tuple[str, str, str]:
    """``key`` in camelCase (as given), snake_case and kebab-case."""
    snake = re.sub(r"(?<!^)([A-Z])", r"_\1", key).lower()
    return key, snake, snake.replace("_", "-")


def _setting(metadata: Mapping[str, Any], key: str) -> tuple[str, Any] | None:
    """(key as written, value) of ``key`` in camelCase, snake_case or kebab-case."""
    if not metadata:
        return None
    for written in _spellings(key):
        if written in metadata:
            return written, metadata[written]
    return None


def self_spawn_setting(metadata: Mapping[str, Any]) -> bool:
    """``allowSelfSpawn`` as a bool (absent = False). Raises ``SpawnSettingError``."""
    found = _setting(metadata, SELF_SPAWN_KEY)
    if found is None or found[1] is None:
        return False
    key, value = found
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise SpawnSettingError(f"{key} must be true or false, got {value!r}")


def child_types(metadata: Mapping[str, Any]) -> frozenset[str] | None:
    """``allowedChildTypes`` in lower case (absent = None: any). Raises ``SpawnSettingError``."""
    found = _setting(metadata, CHILD_TYPES_KEY)
    if found is None or found[1] is None:
        return None
    key, value = found
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list | tuple) or not all(isinstance(i, str) for i in items):
        raise SpawnSettingError(
            f"{key} must be a list of types or a comma-separated string, got {value!r}"
        )
    return frozenset(i.strip().lower() for i in items if i.strip())


def spawn_setting_problems(spec: AgentSpec) -> list[tuple[str, str]]:
    """(key, reason) for each spawn setting of ``spec`` that cannot be read (for validation)."""
    problems: list[tuple[str, str]] = []
    for key, reader in ((SELF_SPAWN_KEY, self_spawn_setting), (CHILD_TYPES_KEY, child_types)):
        try:
            reader(spec.metadata)
        except SpawnSettingError as exc:
            problems.append((key, str(exc)))
    return problems
