"""Small record builders for the cluster tests."""

from __future__ import annotations

from typing import Any

from subagents.messages import Event, EventKind, RunRecord


def run(run_id: str, **fields: Any) -> RunRecord:
    base: dict[str, Any] = {"agent": "worker", "task": f"task of {run_id}", "root_run_id": run_id}
    base.update(fields)
    return RunRecord(run_id=run_id, **base)


def event(run_id: str, kind: EventKind = EventKind.STEP) -> Event:
    return Event(kind=kind, run_id=run_id, agent="worker", root_run_id=run_id, ts=1.5)
