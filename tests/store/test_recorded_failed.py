"""A decision whose writes failed: its runs are recorded failed (``told_answers.recorded``),
and one whose end the store kept anyway (a store that does not roll a failed batch back)
keeps it: writing a second end for it was refused by the store (a run's end is written once,
``AlreadyEnded``), and the others' failure records with it (the last read of session 26)."""

from __future__ import annotations

from pathlib import Path

import pytest

from subagents.actors.told_answers import recorded
from subagents.messages import RunRecord, RunStatus
from subagents.store.base import RunStore
from subagents.store.memory import MemoryStore
from subagents.store.sqlite import SQLiteStore


def _run(i: int, status: RunStatus, ended: float | None = None) -> RunRecord:
    return RunRecord(
        run_id=f"r{i}", agent="a", task="t", root_run_id=f"r{i}", status=status,
        created_at=1.0, ended_at=ended,
    )  # fmt: skip


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_an_end_the_store_kept_stays_and_the_others_are_recorded_failed(
    tmp_path: Path, kind: str
) -> None:
    store: RunStore = MemoryStore() if kind == "memory" else SQLiteStore(tmp_path / "s.db")
    store.save_run(_run(1, RunStatus.COMPLETED, 5.0))  # its end kept with part of the batch
    store.save_run(_run(2, RunStatus.RUNNING))
    assert recorded(store, ["r1", "r2"], "the supervisor's bug")
    first, second = store.get_run("r1"), store.get_run("r2")
    assert first is not None and first.status is RunStatus.COMPLETED and first.ended_at == 5.0
    assert second is not None and second.status is RunStatus.FAILED
    store.close()
