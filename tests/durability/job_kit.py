"""What every crash job (``*_job.py``, run as a script by its test) does the same way: start
its root, or take it up when the store already holds it (the run after a kill), and write its
outcome for the test to read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from subagents.runtime import Runtime
from subagents.store.base import RunStore


def spawn_or_attach(rt: Runtime, store: RunStore, agent: str, task: str) -> Any:
    """The job's root run's handle: spawned, or attached to when a first run left one."""
    roots = [r for r in store.list_runs() if r.parent_run_id is None]
    return rt.spawn(agent, task) if not roots else rt.attach(roots[0].run_id)


def write_outcome(out: str, outcome: Any) -> None:
    """``{"status", "result"}`` of ``outcome`` to the file ``out``."""
    Path(out).write_bytes(
        msgspec.json.encode({"status": str(outcome.status), "result": outcome.result})
    )
