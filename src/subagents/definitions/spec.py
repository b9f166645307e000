"""AgentSpec: one agent definition, immutable, as every layer above sees it.

Field names are snake_case in Python and camelCase on the wire (``rename="camel"``), which is
what Claude Code's frontmatter uses (``disallowedTools``, ``maxTurns``...). Parsers accept
snake_case keys too and normalise them before building the spec.
"""

from __future__ import annotations

import enum
import functools
from typing import Any, Literal, get_args

import msgspec

from subagents.messages.records import Cleanup, OnFailure


class Level(enum.IntEnum):
    """Where a definition came from. Lower value = higher priority when names collide."""

    CODE = 0
    PROJECT = 1
    DIRS = 2
    USER = 3
    BUILTIN = 4

    @property
    def label(self) -> str:
        return self.name.lower()


RestartPolicy = Literal["temporary", "transient"]
"""A restart after ``temporary``: never; ``transient``: after an abnormal end only."""
RESTART_POLICIES: tuple[RestartPolicy, ...] = get_args(RestartPolicy)


class AgentSpec(msgspec.Struct, frozen=True, kw_only=True, rename="camel", omit_defaults=True):
    """An agent definition: Claude Code's fields, catalogue taxonomy, and runtime limits.

    ``tools is None`` means every tool (Claude Code's meaning of an absent ``tools`` key);
    ``tools == ()`` means no tools at all. ``model is None`` means "not said", which resolves
    like ``inherit``. Unknown frontmatter keys are kept in ``metadata``, never dropped.
    """

    # Claude Code
    name: str
    description: str
    prompt: str = ""
    tools: tuple[str, ...] | None = None
    disallowed_tools: tuple[str, ...] = ()
    model: str | None = None
    skills: tuple[str, ...] = ()
    max_turns: int | None = None
    color: str | None = None
    permission_mode: str | None = None
    mcp_servers: Any = None
    hooks: Any = None
    memory: Any = None
    background: bool = False
    network: str | None = None
    """``on`` or ``off``: whether its runs' processes may open TCP connections (docs/tools.md,
    the sandbox); a definition can turn the network off, never on where the runtime's is off."""
    effort: str | None = None
    initial_prompt: str | None = None
    # Taxonomy of larger catalogues
    type: str | None = None
    tier: int | None = None
    scope: str | None = None
    capabilities: tuple[str, ...] | dict[str, Any] = ()
    priority: int | str | None = None
    key_sub_agents: tuple[str, ...] = ()
    extends: str | None = None
    # This runtime's limits
    max_depth: int | None = None
    max_children: int | None = None
    timeout: float | None = None
    token_budget: int | None = None
    restart: RestartPolicy = "temporary"
    # Supervision policies (docs/supervision.md); None = the runtime's default
    max_restarts: int | None = None
    restart_period: float | None = None
    restart_backoff: float | None = None
    restart_backoff_max: float | None = None
    on_failure: OnFailure | None = None
    max_retries: int | None = None
    cost_budget: float | None = None
    shared_context: tuple[str, ...] | None = None
    inherit_messages: bool | None = None
    cleanup: Cleanup | None = None
    """What the sweeper does with this agent's finished runs: keep their transcript
    (events, checkpoints, journal) or delete it once archived (docs/store.md)."""
    topics: tuple[str, ...] = ()
    """Topics its runs are subscribed to from their admission (docs/runtime.md, "Topics")."""
    # Additions to list fields (``+tools: Write``): appended to what the definition inherits
    # through ``extends`` (or sets itself); a list field written plainly replaces the parent's
    additions: dict[str, tuple[str, ...]] = msgspec.field(default_factory=dict)
    # Everything else the file said
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    # Provenance
    source: str | None = None
    category: str = ""
    level: Level = Level.CODE

    def allows_tool(self, tool: str) -> bool:
        """Whether this definition lets its agent use ``tool`` (``tools`` minus disallowed).

        An entry with a pattern (``Bash(git diff:*)``) in ``tools`` offers the tool, for
        calls that match (the permission policy checks); in ``disallowedTools`` it denies
        matching calls but leaves the tool offered."""
        if tool in self.disallowed_tools:
            return False
        if self.tools is None:
            return True
        try:
            return tool in _offered_names(self.tools)
        except TypeError:  # a spec built by hand with a list: not hashable, scanned
            return any(t == tool or t.split("(", 1)[0].strip() == tool for t in self.tools)

    @property
    def capability_names(self) -> tuple[str, ...]:
        """Capabilities as names, whether given as a list or a mapping."""
        if isinstance(self.capabilities, dict):
            return tuple(str(k) for k in self.capabilities)
        return self.capabilities


@functools.lru_cache(maxsize=1024)
def _offered_names(tools: tuple[str, ...]) -> frozenset[str]:
    """The tool names a ``tools`` list offers: each entry, and each entry's tool without its
    pattern (``Bash(git diff:*)`` offers ``Bash``). Read once per list, not per question: a
    run's start asks ``allows_tool`` of every tool the runtime has (``behaviour/offer.py``)."""
    return frozenset((*tools, *(t.split("(", 1)[0].strip() for t in tools)))
