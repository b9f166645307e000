"""Whether a step's next spawns would only queue behind runs queued now: each has the slot
key of a run already queued (made as its admission would make it: the definition found now,
so one reloaded with another tier since those runs queued has another key). Such a spawn
never starts before the runs queued with its key (``SlotPool.try_take``: if its key fits,
theirs does, and they go first), so deciding it a little later delays no start
(``actors/step_tail.py`` holds such a rest off the first wave).

Why here, not in the actor's helper: it is a decision on the core's state alone (its
definitions, its runs, its queue), tested without threads; the step tail asks it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from subagents.messages import SpawnRequest

if TYPE_CHECKING:
    from subagents.supervision.core import SupervisorCore


def only_queue(core: SupervisorCore, messages: Iterable[Any]) -> bool:
    """Whether every spawn among ``messages`` has a slot key queued now: the key of each
    (agent, parent) pair, not one per spawn (a step's spawns are nearly all of one pair).
    False for a pair whose agent or parent is not found, or whose definition cannot be read
    (decided at once: its admission answers it)."""
    keys = core.slots.queued_keys
    pairs = {(m.agent, m.parent_run_id) for m in messages if type(m) is SpawnRequest}
    for agent, parent_id in pairs:
        try:
            spec = core.admission.lookup(agent)
        except Exception:  # (a definition that cannot be read: admission says so, at once)
            return False
        parent = core.runs.get(parent_id) if parent_id is not None else None
        if spec is None or (parent is None and parent_id is not None):
            return False
        if core.parking.slot_key(spec, parent) not in keys:
            return False
    return True
