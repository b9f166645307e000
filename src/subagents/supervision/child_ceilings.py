"""ChildCeilings: a parent's children's ceiling, and what it narrows, worked out once.

Every child of one parent gets the same ceiling (``ceilings.child_ceiling``: the parent's
own and the parent's grant), and the line saying what it narrows (``ceilings.narrowed``)
depends only on that ceiling and the child's definition. A step's fan-out admits its
children one after the other, each asking both again (a tuple, a grant and ~5 us of text
per child, the same for all of them); this keeps the answers for the last parent asked
about, so the children of one step share them. Pure functions of immutable inputs: the
verdicts and texts are the ones the functions give.
"""

from __future__ import annotations

from subagents.definitions.spec import AgentSpec
from subagents.messages import PermissionGrant, RunRecord
from subagents.supervision.ceilings import child_ceiling, narrowed


class ChildCeilings:
    """The last parent's children's ceiling and its narrowing per child definition."""

    __slots__ = ("_ceiling", "_narrowed", "_parent", "_parent_ceiling", "_parent_spec")

    def __init__(self) -> None:
        self._parent: str | None = None
        self._parent_ceiling: tuple[PermissionGrant, ...] = ()
        self._parent_spec: AgentSpec | None = None
        self._ceiling: tuple[PermissionGrant, ...] = ()
        self._narrowed: dict[int, tuple[AgentSpec, str | None]] = {}

    def ceiling(self, parent: RunRecord, parent_spec: AgentSpec) -> tuple[PermissionGrant, ...]:
        """``child_ceiling(parent, parent_spec)``; the same tuple for the same parent."""
        if (
            parent.run_id != self._parent
            or parent.ceiling is not self._parent_ceiling
            or parent_spec is not self._parent_spec
        ):
            self._ceiling = child_ceiling(parent, parent_spec)
            self._parent = parent.run_id
            self._parent_ceiling = parent.ceiling
            self._parent_spec = parent_spec
            self._narrowed = {}
        return self._ceiling

    def narrowed(self, spec: AgentSpec, ceiling: tuple[PermissionGrant, ...]) -> str | None:
        """``narrowed(spec, ceiling)``; remembered per definition for the last parent's."""
        if ceiling is not self._ceiling:  # not the last parent's children's: as asked
            return narrowed(spec, ceiling)
        known = self._narrowed.get(id(spec))
        if known is not None and known[0] is spec:
            return known[1]
        text = narrowed(spec, ceiling)
        self._narrowed[id(spec)] = (spec, text)  # the spec kept: its id is not reused
        return text
