"""Scripts for the offline model: what each turn of an agent says, decoded and checked up front.

Why decode at load time: a script is written by hand in YAML frontmatter or a JSON/YAML file.
A typo found in the middle of a multi-agent run is hard to trace; found at load time, the error
names the agent, the turn and the field, and nothing runs with a half-understood script.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, get_args

import msgspec
import yaml

from subagents.definitions.spec import AgentSpec
from subagents.messages import StopReason


class ScriptError(ValueError):
    """A script that cannot be used: names the source, the agent, the turn and the field."""


class ScriptedToolCall(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One tool call of a turn. String values inside ``input`` are templates."""

    name: str
    input: dict[str, Any] = msgspec.field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.name.strip():
            raise ValueError("tool_calls: `name` must not be empty")


class ScriptedUsage(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Usage to report for a turn; a counter left out is computed from the text's length."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    cost_usd: float = 0.0

    def __post_init__(self) -> None:
        for field in (
            "input_tokens",
            "output_tokens",
            "cache_creation_input_tokens",
            "cache_read_input_tokens",
            "cost_usd",
        ):
            value = getattr(self, field)
            if value is not None and value < 0:
                raise ValueError(f"usage: `{field}` must be >= 0, got {value}")


class ScriptedError(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A failure the turn raises as ``ModelError(kind, message, transient=transient)``."""

    kind: str = "script"
    message: str = "scripted failure"
    transient: bool = False


_STOP_REASONS: frozenset[str] = frozenset(get_args(StopReason))


class Turn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One model turn of a script.

    ``text`` and the string values of ``tool_calls[].input`` are templates. ``delay`` is
    simulated latency in seconds. ``error`` makes the turn fail, on every call or, with
    ``fail_times``, on the first N calls of this turn per run. ``stop_reason`` overrides the
    computed one (``tool_use`` when there are tool calls, else ``end_turn``). ``stream``: when
    the runtime streams, the turn's text and each tool call's input are told in this many
    pieces each, spread over ``delay``; a failing turn tells the first half of them, then
    fails (a stream that breaks half way).
    """

    text: str | None = None
    tool_calls: tuple[ScriptedToolCall, ...] = ()
    delay: float = 0.0
    usage: ScriptedUsage | None = None
    error: ScriptedError | None = None
    fail_times: int | None = None
    stop_reason: str | None = None
    stream: int | None = None

    def __post_init__(self) -> None:
        if self.text is None and not self.tool_calls and self.error is None:
            raise ValueError("a turn needs `text`, `tool_calls` or `error`")
        if self.delay < 0:
            raise ValueError(f"`delay` must be >= 0 seconds, got {self.delay}")
        if self.fail_times is not None:
            if self.error is None:
                raise ValueError("`fail_times` needs an `error` to raise")
            if self.fail_times < 0:
                raise ValueError(f"`fail_times` must be >= 0, got {self.fail_times}")
        if self.stream is not None and self.stream < 1:
            raise ValueError(f"`stream` must be >= 1 pieces, got {self.stream}")
        if self.stop_reason is not None and self.stop_reason not in _STOP_REASONS:
            known = ", ".join(sorted(_STOP_REASONS))
            raise ValueError(f"`stop_reason` {self.stop_reason!r} is not one of: {known}")


Script = tuple[Turn, ...]


def parse_turn(raw: Turn | Mapping[str, Any] | str, *, agent: str, index: int, source: str) -> Turn:
    """One turn from a Turn, a mapping, or a bare string (shorthand for ``{text: ...}``)."""
    if isinstance(raw, Turn):
        return raw
    if isinstance(raw, str):
        raw = {"text": raw}
    if not isinstance(raw, Mapping):
        raise ScriptError(
            f"{source}: agent {agent!r}, turn {index}: expected a mapping of turn fields "
            f"(text, tool_calls, delay, usage, error, fail_times, stop_reason, stream), "
            f"got {type(raw).__name__}: {raw!r}"
        )
    try:
        return msgspec.convert(dict(raw), Turn)
    except msgspec.ValidationError as exc:
        raise ScriptError(f"{source}: agent {agent!r}, turn {index}: {exc}") from None


def parse_script(raw: object, *, agent: str, source: str = "script") -> Script:
    """A whole script (a list of turns) for one agent."""
    if isinstance(raw, str | bytes) or not isinstance(raw, Sequence):
        raise ScriptError(
            f"{source}: agent {agent!r}: a script is a list of turns, got {type(raw).__name__}"
        )
    return tuple(
        parse_turn(turn, agent=agent, index=index, source=source) for index, turn in enumerate(raw)
    )


def parse_scripts(raw: Mapping[str, object], *, source: str = "scripts") -> dict[str, Script]:
    """Scripts for several agents: ``{agent name: [turns]}``."""
    scripts: dict[str, Script] = {}
    for agent, turns in raw.items():
        if not isinstance(agent, str) or not agent:
            raise ScriptError(f"{source}: agent names must be non-empty strings, got {agent!r}")
        scripts[agent] = parse_script(turns, agent=agent, source=source)
    return scripts


def load_scripts_file(path: str | Path) -> dict[str, Script]:
    """Scripts from a YAML or JSON file (``.json`` is read as JSON, anything else as YAML)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ScriptError(f"{path}: cannot read script file: {exc}") from None
    is_json = path.suffix.lower() == ".json"
    try:
        raw: object = msgspec.json.decode(data) if is_json else yaml.safe_load(data)
    except (msgspec.DecodeError, yaml.YAMLError) as exc:
        raise ScriptError(f"{path}: not valid {_format_name(path)}: {exc}") from None
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ScriptError(
            f"{path}: expected a mapping of agent name -> list of turns, got {type(raw).__name__}"
        )
    return parse_scripts(raw, source=str(path))


def scripts_from_metadata(
    specs: Iterable[AgentSpec], *, strict: bool = True
) -> tuple[dict[str, Script], dict[str, ScriptError]]:
    """Scripts from agent definitions: each spec's ``metadata["script"]``, when present.

    Returns the scripts and, when not ``strict``, the error of each agent whose script is bad
    (``strict`` raises the first one instead).
    """
    scripts: dict[str, Script] = {}
    broken: dict[str, ScriptError] = {}
    for spec in specs:
        raw = spec.metadata.get("script")
        if raw is None:
            continue
        source = spec.source or f"definition {spec.name!r}"
        try:
            scripts[spec.name] = parse_script(raw, agent=spec.name, source=f"{source}: script")
        except ScriptError as exc:
            if strict:
                raise
            broken[spec.name] = exc
    return scripts, broken


def _format_name(path: Path) -> str:
    return "JSON" if path.suffix.lower() == ".json" else "YAML"
