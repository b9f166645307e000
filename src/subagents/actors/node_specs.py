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
definition is the same as it is carried out with the kept object instead. The same: their
msgpack encodings are equal, byte for byte (not ``==``, which holds ``1 == 1.0 == True`` in
the free-form fields: a hook's ``timeout: true``, refused, fixed to ``timeout: 1`` compares
equal, and its runs would have gone on failing with the kept one). A definition that
differs (reloaded on the driver) replaces the kept one: a start never runs with a
definition other than the one it carried, only with an identical object.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from subagents.definitions.spec import AgentSpec
from subagents.supervision.effects import Effect, StartRun

_encode = msgspec.msgpack.Encoder().encode

KEPT_MOST = 1024
"""The most names kept (cleared when full: a node sent that many definitions stays bounded)."""


class KeptSpecs:
    """The definitions a node was sent, one object per name (see the module). Used under the
    node's lock (``NodeRuns.deliver``): not thread-safe on its own."""

    __slots__ = ("_kept",)

    def __init__(self) -> None:
        self._kept: dict[str, tuple[AgentSpec, bytes]] = {}
        """Each name's kept definition and its encoding."""

    def same(self, effects: Sequence[Effect]) -> Sequence[Effect]:
        """``effects``, each start's definition replaced by the kept identical object (the
        same sequence when nothing was replaced)."""
        replaced: list[Effect] | None = None
        kept = self._kept
        for index, effect in enumerate(effects):
            if type(effect) is not StartRun:
                continue
            spec = effect.spec
            known = kept.get(spec.name)
            if known is not None and known[0] is spec:
                continue
            try:
                encoded = _encode(spec)
            except (TypeError, msgspec.EncodeError):  # (not off the link: one made by hand)
                continue  # carried out as itself, nothing kept
            if known is not None and known[1] == encoded:
                if replaced is None:
                    replaced = list(effects)
                replaced[index] = msgspec.structs.replace(effect, spec=known[0])
                continue
            if len(kept) >= KEPT_MOST:
                kept.clear()
            kept[spec.name] = (spec, encoded)  # the first of its name, or one reloaded since
        return effects if replaced is None else replaced
