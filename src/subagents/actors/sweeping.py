"""The store's sweeper, run on the supervisor's thread when a ``Sweep`` comes."""

from __future__ import annotations

from typing import Any

from subagents.logs import get_logger
from subagents.messages import Sweep
from subagents.store.base import RunStore

log = get_logger("subagents.supervisor")


def sweep(store: RunStore, now: float, message: Sweep, *, asked: bool) -> Any:
    """Run ``store``'s sweeper, if it has one (SQLite does): housekeeping in a transaction
    of its own; a failure loses no run's state, goes to an asker or is logged."""
    sweeper = getattr(store, "sweep", None)
    if sweeper is None:
        return None
    try:
        return sweeper(
            now=now,
            archive_after_minutes=message.archive_after_minutes,
            retention_days=message.retention_days,
        )
    except Exception:
        if asked:
            raise
        log.exception("the sweeper failed; it runs again at its next turn")
        return None
