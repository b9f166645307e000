"""KeptSpecs: one definition object per definition on a node, whatever the link decoded.

Why: a run's start reads its definition through caches made once per definition object
(compared by identity, so a reloaded definition is never served a stale answer): its
permission policy (``PermissionPolicy.for_agent``), its settled tool offer (``offer._settled``),
its spawn grant (``SpawnRules.grant``), its network answer (``tool_calls.network_of``). On one
machine every run of a definition holds the registry's one object, and a fan-out's 1,000
children make each answer once. On a node, each ``StartRun`` arrives decoded from the link
with a definition object of its own: every cache missed at every start (and, full of
definitions never seen again, was cleared every few hundred), so each child on a node parsed
its permission rules and filtered its tools again (measured by yappi in the node host of the
1,000-child cluster fan-out: ~17% of its CPU; benchmarks/README.md, "Session 31
(e-cluster22)").

So the node keeps the last definition it was sent under each name, and a start whose
definition equals it (msgspec's ``==``: every field) is carried out with the kept object
instead. A definition that differs (reloaded on the driver) replaces the kept one: a start
never runs with a definition other than the one it carried, only with an equal object.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from subagents.definitions.spec import AgentSpec
from subagents.supervision.effects import Effect, StartRun

KEPT_MOST = 1024
"""The most names kept (cleared when full: a node sent that many definitions stays bounded)."""


class KeptSpecs:
    """The definitions a node was sent, one object per name (see the module). Used under the
    node's lock (``NodeRuns.deliver``): not thread-safe on its own."""

    __slots__ = ("_kept",)

    def __init__(self) -> None:
        self._kept: dict[str, AgentSpec] = {}

    def same(self, effects: Sequence[Effect]) -> Sequence[Effect]:
        """``effects``, each start's definition replaced by the kept equal object (the same
        sequence when nothing was replaced)."""
        replaced: list[Effect] | None = None
        kept = self._kept
        for index, effect in enumerate(effects):
            if type(effect) is not StartRun:
                continue
            spec = effect.spec
            known = kept.get(spec.name)
            if known is spec:
                continue
            if known is not None and known == spec:
                if replaced is None:
                    replaced = list(effects)
                replaced[index] = msgspec.structs.replace(effect, spec=known)
                continue
            if len(kept) >= KEPT_MOST:
                kept.clear()
            kept[spec.name] = spec  # the first of its name, or a definition reloaded since
        return effects if replaced is None else replaced
