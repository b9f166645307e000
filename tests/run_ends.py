"""The ends of a run in its events: what the tests that lose, cut or race a run's end write
check (it ends once: ``store.base.AlreadyEnded``)."""

from __future__ import annotations

from subagents.messages import TERMINAL_STATUSES, EventKind
from subagents.store.base import RunStore

ENDS = frozenset(EventKind(status.value) for status in TERMINAL_STATUSES)
"""The event kinds of a run's end (one per terminal status)."""


def ends_of(store: RunStore, run_id: str) -> list[EventKind]:
    """The kinds of ``run_id``'s end events, in the order appended (one, once it ended)."""
    return [e.kind for e in store.events(run_id) if e.kind in ENDS]
