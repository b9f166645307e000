"""SpawnRules: the one rule book for "may this run spawn that agent?".

Definitions and limits in, a decision and its reason out. Every place that needs the answer
asks this class, so they cannot disagree:

- the admission checks (``admission_checks``: ``spawn_rule`` and ``depth_limit``), which
  decide both what admission lets through, for every requester (an LLM's tool call, a
  function agent's ``ctx.spawn``, ``fan_out`` children, the Python API and the CLI), and
  which agent names an LLM's spawn tools list (``admission_checks.offer``);
- ``SpawnRules.check``: the two rules at once, for a caller holding definitions only;
- the catalog's ``check_type_restriction`` uses the definition half
  (``definitions.spawn_grant.SpawnGrant``), which is what this class adds depth to.

A refusal's text starts with the rule that refused (``spawn rule: ...``, ``depth limit: ...``):
an LLM gets it as an ``is_error`` tool result, a function agent as ``SpawnRefused``.
Rules refuse; concurrency limits never do (they queue, see ``slots``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from subagents.definitions.spawn_grant import SpawnGrant, SpawnSettingError
from subagents.definitions.spec import AgentSpec
from subagents.supervision.limits import Limits


class SpawnDecision(NamedTuple):
    """Whether a spawn may go ahead; ``reason`` names the rule when it may not. (A tuple: one
    is made per spawn, and a frozen dataclass costs ~1 us more to build.)"""

    allowed: bool
    depth: int
    """The depth the child would have (a root: 0)."""
    reason: str | None = None


_ROOT = SpawnDecision(allowed=True, depth=0)


class DepthBound(NamedTuple):
    """A run in a parent's line of ancestors (root first): its agent, that definition's
    ``maxDepth``, its depth. Small and plain: the agent side is handed its run's ancestors
    (``Standing.ancestors``) so that its offer applies the same bound as admission."""

    agent: str
    max_depth: int | None
    depth: int

    @classmethod
    def of(cls, spec: AgentSpec, depth: int) -> DepthBound:
        return cls(spec.name, spec.max_depth, depth)


def _set_by(by: DepthBound | None) -> str:
    """Whose ``maxDepth`` set a depth limit, for its refusal (nothing: the runtime's)."""
    if by is None:
        return ""
    return f" (maxDepth {by.max_depth} of {by.agent}, at depth {by.depth})"


class SpawnRules:
    """The spawn rules of one runtime (its limits). Plain and single-threaded-safe: the only
    state is a cache of grants by definition object (definitions are immutable)."""

    _CACHE_MAX = 1024

    def __init__(self, limits: Limits | None = None) -> None:
        self.limits = limits or Limits()
        self._grants: dict[int, tuple[AgentSpec, SpawnGrant]] = {}

    def grant(self, spec: AgentSpec) -> SpawnGrant:
        """``spec``'s grant, read once per definition object. A setting that cannot be read
        turns spawning off for that agent, the reason naming the key."""
        cached = self._grants.get(id(spec))
        if cached is not None and cached[0] is spec:
            return cached[1]
        try:
            grant = SpawnGrant.of(spec)
        except SpawnSettingError as exc:
            grant = SpawnGrant(
                agent=spec.name,
                disabled=f"{spec.name} may not spawn subagents: {exc}",
                names=None,
                denied=frozenset(),
                types=None,
                self_spawn=False,
                fan_out=False,
            )
        if len(self._grants) >= self._CACHE_MAX:  # definitions reloaded many times: stay bounded
            self._grants.clear()
        self._grants[id(spec)] = (spec, grant)  # the spec is kept, so its id is not reused
        return grant

    def depth_limit(
        self, parent: AgentSpec, parent_depth: int, ancestors: Sequence[DepthBound] = ()
    ) -> int:
        """The deepest a child of ``parent`` (at ``parent_depth``) may be: the runtime's
        ``max_depth``, tightened by the ``maxDepth`` (levels below it) of the parent and of
        each of its ``ancestors``."""
        return self._bound(parent, parent_depth, ancestors)[0]

    def _bound(
        self, parent: AgentSpec, parent_depth: int, ancestors: Sequence[DepthBound]
    ) -> tuple[int, DepthBound | None]:
        """The depth limit, and the run whose ``maxDepth`` set it (None: the runtime's)."""
        limit, by = self.limits.max_depth, None
        for placed in ancestors:
            own = placed.max_depth
            if own is not None and placed.depth + own < limit:
                limit, by = placed.depth + own, placed
        own = parent.max_depth  # the parent last, as the deepest of the line; its bound
        if own is not None and parent_depth + own < limit:  # made only when it sets the limit
            limit, by = parent_depth + own, DepthBound.of(parent, parent_depth)
        return limit, by

    def check(
        self,
        child: AgentSpec,
        parent: AgentSpec | None = None,
        parent_depth: int = 0,
        ancestors: Sequence[DepthBound] = (),
    ) -> SpawnDecision:
        """May ``parent`` (at ``parent_depth``, below ``ancestors``; None: a root run from
        the API or the CLI) spawn ``child``? Roots always may (depth 0); a child must pass
        the parent's grant, then the depth limit, which every ancestor's ``maxDepth`` bounds
        too (``b`` with ``maxDepth: 1`` may have children, and they no children, whatever
        their own definitions say)."""
        if parent is None:
            return _ROOT
        depth = parent_depth + 1
        refusal = self.grant(parent).refusal(child) or self.depth_refusal(
            parent, parent_depth, ancestors
        )
        if refusal is not None:
            return SpawnDecision(allowed=False, depth=depth, reason=refusal)
        return SpawnDecision(allowed=True, depth=depth)

    def depth_refusal(
        self, parent: AgentSpec, parent_depth: int, ancestors: Sequence[DepthBound] = ()
    ) -> str | None:
        """Why a child of ``parent`` (at ``parent_depth``, below ``ancestors``) would be too
        deep, naming the limit and whose ``maxDepth`` set it; None: it would not."""
        depth = parent_depth + 1
        limit, by = self._bound(parent, parent_depth, ancestors)
        if depth <= limit:
            return None
        return (
            f"depth limit: a child of {parent.name} would be at depth {depth},"
            f" the limit is {limit}{_set_by(by)}"
        )
