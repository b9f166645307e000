"""A restore whose writes the store refuses (a real SQLite store whose disk is full) takes
nothing up: the runtime's start fails with an error naming the store, why, and that the
runs stay orphaned; nothing of this runtime's is recorded for them, even once the store
takes writes again; and a restore then (the next start's, or this runtime's again) takes
them all up and runs them.

The full disk is SQLite's own page cap (``SQLiteStore(max_bytes=...)``, SQLITE_FULL as on a
full disk) set at the store's size once the orphans are written: the runtime's start (its
lease) fits in the pages there, the restore's hundreds of writes do not."""

from __future__ import annotations

import os
import time
from collections import Counter
from pathlib import Path

import pytest

from subagents.behaviour.function import AgentContext, FunctionAgent
from subagents.messages import RunRecord, RunStatus
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime
from subagents.store.base import StoreError
from subagents.store.sqlite import SQLiteStore

from .conftest import QUIET, WAIT

pytestmark = pytest.mark.usefixtures("no_new_threads")

GONE = "gone-host:4242:abcd"
"""The owner of the orphans: a runtime that crashed (it left no lease)."""
ORPHANS = 120
"""Half of them of an agent still defined (resumed), half of one that is not (failed, an
outcome each: more rows than the full store has room for)."""


def quick(ctx: AgentContext) -> str:
    return f"done {ctx.task}"


AGENTS = [FunctionAgent.create("quick", quick)]


def _full_store_of_orphans(db: Path) -> SQLiteStore:
    store = SQLiteStore(db)
    for i in range(ORPHANS):
        run_id = f"r-orphan{i}"
        store.save_run(
            RunRecord(
                run_id=run_id, agent="gone" if i % 2 else "quick", task=str(i),
                root_run_id=run_id, status=RunStatus.RUNNING, created_at=time.time(),
                started_at=time.time(), owner=GONE,
            )
        )  # fmt: skip
    store.close()
    return SQLiteStore(db, max_bytes=os.path.getsize(db))


def _still_orphaned(store: SQLiteStore) -> None:
    runs = store.list_runs()
    assert len(runs) == ORPHANS
    assert Counter((r.status, r.owner) for r in runs) == {(RunStatus.RUNNING, GONE): ORPHANS}


def _restored_and_run(rt: Runtime) -> None:
    for i in range(0, ORPHANS, 2):
        outcome = rt.attach(f"r-orphan{i}").result(timeout=WAIT)
        assert (outcome.status, outcome.result) == (RunStatus.COMPLETED, f"done {i}")


def test_a_start_whose_restore_the_full_store_refuses_says_so_and_takes_nothing(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    store = _full_store_of_orphans(db)
    try:
        with pytest.raises(StoreError) as failed:
            Runtime(AGENTS, model=ScriptedModel(), store=store, restore=True, **QUIET)
        _still_orphaned(store)
    finally:
        store.close()
    message = str(failed.value)
    assert message.startswith(f"restore of the store's orphaned runs failed: {db}: ")
    assert "disk full" in message and "no run was taken up" in message
    with Runtime(AGENTS, model=ScriptedModel(), store=SQLiteStore(db), restore=True) as rt:
        report = rt.restore_report
        assert (len(report.resumed), len(report.failed)) == (ORPHANS // 2, ORPHANS // 2)
        _restored_and_run(rt)


def test_a_restore_refused_then_the_store_working_again_records_none_of_its_runs(
    tmp_path: Path,
) -> None:
    """Before: the runs the refused restore took up stayed in the core; once the store took
    writes again, its recovery recorded them failed as this runtime's (seen: 60 failed with
    the store's error), and no restore would run them again (resumed 0)."""
    store = _full_store_of_orphans(tmp_path / "runs.db")
    try:
        with Runtime(AGENTS, model=ScriptedModel(), store=store, restore=False, **QUIET) as rt:
            with pytest.raises(StoreError, match="no run was taken up"):
                rt._requests.restore(None)
            store.set_max_bytes(None)  # space is freed: the next ask finds the store working
            assert rt.spawn("quick", "new").result(timeout=WAIT).result == "done new"
            orphans = [r for r in store.list_runs() if r.run_id.startswith("r-orphan")]
            assert {(r.status, r.owner) for r in orphans} == {(RunStatus.RUNNING, GONE)}
            report = rt._requests.restore(None)
            assert (len(report.resumed), len(report.failed)) == (ORPHANS // 2, ORPHANS // 2)
            _restored_and_run(rt)
    finally:
        store.close()
