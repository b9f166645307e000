"""A waiter is told how its run's end is recorded only once that record is committed: in a
restore, and in the recovery after a store failure, which each write in a transaction of
their own (not the supervisor's group).

Before: a restore whose write broke (a bug) recorded the runs it had ended failed inside its
own still open transaction and told their waiters "recorded failed" there; the error then
rolled the transaction back, the record with it, and the store kept the run unfinished (a
restore would run it again). The recovery after a store failure did the same, and its error
escaped the supervisor's handling of the tell that tried it."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import pytest
from test_store_failure_end import AGENTS, REFUSED, WAIT, RefusingSQLite, _sleeper

from subagents import AdmissionError, FunctionAgent, Runtime, SQLiteStore
from subagents.messages import Outcome, RunRecord, RunStatus

QUIET = {"command_poll_s": 3600.0, "sweep_every_s": 3600.0}
"""No command poll nor sweep: nothing but the test's own calls tries a recovery."""

BUG = "save_outcome() got an unexpected keyword argument"


class BreakingRestoreSQLite(SQLiteStore):
    """Breaks (a bug) on the outcome of a run the restore ends: its agent is gone."""

    def save_outcome(self, outcome: Outcome, delivered: bool = False) -> None:
        if outcome.error_kind == "unknown_agent":
            raise TypeError(BUG)
        super().save_outcome(outcome, delivered)


def _orphan(db: Path) -> str:
    """A root of a runtime that is gone (no lease), of an agent no longer defined."""
    store = SQLiteStore(db)
    run_id = "r-orphan"
    now = time.time()
    store.save_run(
        RunRecord(
            run_id=run_id, agent="gone", task="t", root_run_id=run_id, status=RunStatus.RUNNING,
            created_at=now, started_at=now, owner="gone-host:4242:abcd",
        )
    )  # fmt: skip
    store.close()
    return run_id


def test_a_restore_whose_write_breaks_tells_recorded_failed_only_once_committed(
    tmp_path: Path,
) -> None:
    orphan = _orphan(tmp_path / "runs.db")
    store = BreakingRestoreSQLite(tmp_path / "runs.db")
    with Runtime(AGENTS, store=store, restore=False, **QUIET) as rt:
        handle = rt.attach(orphan)  # its caller, waiting before the restore
        with pytest.raises(TypeError, match=re.escape(BUG)):
            rt._requests.restore(None)
        outcome = handle.result(timeout=WAIT)
        assert outcome.status is RunStatus.FAILED and outcome.error_kind == "supervisor"
        assert "recorded failed" in (outcome.error or ""), outcome
        # as told: recorded failed, committed (before: rolled back with the restore)
        record = store.get_run(orphan)
        assert record is not None and record.status is RunStatus.FAILED, record
        assert record.outcome is not None and record.outcome.error == outcome.error


class BreakingRecoverySQLite(RefusingSQLite):
    """Refuses a root's end (``REFUSED``: the store fails), then breaks (a bug) once on an
    outcome the recovery writes (failed with the store's error)."""

    breaks = 1

    def save_outcome(self, outcome: Outcome, delivered: bool = False) -> None:
        if outcome.error_kind == "store" and self.breaks:
            self.breaks -= 1
            raise TypeError(BUG)
        super().save_outcome(outcome, delivered)


def test_a_recovery_whose_write_breaks_tells_nothing_and_is_tried_again(tmp_path: Path) -> None:
    """The recovery's write breaks once: rolled back, nobody is told anything of it (a run's
    caller was told the store's failure, which stays true); the next spawn tries it again,
    and then the store records what the callers were told."""
    store = BreakingRecoverySQLite(tmp_path / "runs.db")
    started = threading.Event()
    agents = [*AGENTS, FunctionAgent.create("sleeper", _sleeper(started))]
    with Runtime(agents, store=store, **QUIET) as rt:
        sleeping = rt.spawn("sleeper", "zz")
        assert started.wait(WAIT)
        assert rt.spawn("echo", REFUSED).result(timeout=WAIT).error_kind == "store"
        assert sleeping.result(timeout=WAIT).error_kind == "store"  # stopped at the halt
        again = rt.attach(sleeping.run_id)  # waited on again: the store keeps it unfinished
        with pytest.raises(AdmissionError, match="the disk is full"):  # the recovery broke
            rt.spawn("echo", "first").result(timeout=WAIT)
        assert rt.spawn("echo", "ok").result(timeout=WAIT).result == "ok"  # recovered
        outcome = again.result(timeout=WAIT)
        # told once the recovery is committed, its store's error (before: "recorded
        # failed" of a record the rollback removed)
        assert outcome.error_kind == "store", outcome
        assert "recorded failed" not in (outcome.error or ""), outcome
        record = store.get_run(sleeping.run_id)
        assert record is not None and record.status is RunStatus.FAILED, record
        assert record.outcome is not None and record.outcome.error == outcome.error
