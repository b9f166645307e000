"""A close that begins while the store fails admits nothing after it, once the store works
again either.

While the store fails, the supervisor answers the close's ``StopAll`` without deciding it
(every run was stopped when the store failed: ``actors/outage.py``). It did not mark the
admission closed, so a spawn reaching it after that close, once the store took writes again
(its own recovery attempt succeeding), was admitted and its agent started: after the close
had begun, into a store the closing runtime was about to leave.

The outage is real: another connection holds SQLite's write lock (a locked store), so every
write of the runtime fails after its busy timeout; committing that connection's transaction
is the store working again. The close's ``StopAll`` is asked of the supervisor as
``SupervisorClient.close`` asks it, with the runtime left open, so that the late spawn can
be told after it by the public ``spawn`` (a close that runs on would end the supervisor)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from subagents import FunctionAgent, Runtime, SQLiteStore
from subagents.behaviour.function import AgentContext
from subagents.messages import Ask, RunStatus, StopAll
from subagents.runtime import AdmissionError

WAIT = 60.0


def leaf(ctx: AgentContext) -> str:
    return "ok " + ctx.task


def test_a_spawn_after_a_close_during_a_store_outage_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    store = SQLiteStore(db, busy_timeout=0.05)
    quiet = {"command_poll_s": 3600, "sweep_every_s": 3600}
    rt = Runtime([FunctionAgent.create("leaf", leaf)], store=store, **quiet)
    locker = sqlite3.connect(db, isolation_level=None)
    try:
        assert rt.run("leaf", "before", wait=WAIT).result == "ok before"
        locker.execute("BEGIN IMMEDIATE")  # the store is locked: every write fails
        during = rt.spawn("leaf", "during")
        try:  # the store failed: refused on its handle, or failed with the store's error
            outcome = during.result(WAIT)
        except AdmissionError as exc:
            assert "busy" in str(exc)
        else:
            assert (outcome.status, outcome.error_kind) == (RunStatus.FAILED, "store")
        supervisor = rt._hosting.supervisor
        assert supervisor is not None
        # the close's StopAll while the store still fails: answered, nothing to cancel
        assert supervisor._ref.ask(Ask(StopAll()), timeout=WAIT) == ()
        locker.execute("COMMIT")  # the store takes writes again
        late = rt.spawn("leaf", "late")
        with pytest.raises(AdmissionError, match="the runtime is closing"):
            late.result(WAIT)  # refused: no run starts after the close began
        assert rt.get(late.run_id) is None
    finally:
        locker.close()
        rt.close()
    store.close()
    reopened = SQLiteStore(db)
    try:
        runs = {r.task: r.status for r in reopened.list_runs()}
        assert runs == {"before": RunStatus.COMPLETED}  # nothing of the late spawn, or "during"
    finally:
        reopened.close()
