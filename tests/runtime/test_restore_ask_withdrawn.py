"""A restore whose ask times out takes up nothing half-owned (``actors/ask_claims``).

Before: a runtime's restore asked the supervisor without a claim; one that timed out stayed
in the supervisor's inbox and was decided later: the orphaned runs were taken up (their
owner changed to this runtime) by a runtime whose start had failed, and its close then
ended them cancelled: runs that a later restore would have finished were lost. Now the
restore carries a claim: one the supervisor had not taken when its wait ran out is dropped
(the runs stay orphaned, untouched: restoring again takes them), one it took is waited for,
and the error says which of the two happened.

The supervisor is held by an event subscriber (it runs on the supervisor's thread) blocking
on an ``Event``; the restore's timeout is made short, never slept on. The orphan is a run of
a runtime that is gone (no lease): what ``Runtime(restore=True)`` and ``subagents resume``
take up."""

from __future__ import annotations

import shlex
import threading
import time
from pathlib import Path

import pytest

from subagents.behaviour.function import AgentContext, FunctionAgent
from subagents.definitions import AgentSpec
from subagents.messages import Event, RunRecord, RunStatus
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime
from subagents.store.sqlite import SQLiteStore

from .conftest import QUIET, WAIT

pytestmark = pytest.mark.usefixtures("no_new_threads")

TAKEN_WITHIN = 15.0
"""The restore's timeout in the case the supervisor takes it: an idle supervisor (QUIET: no
poll nor sweep in its inbox) takes the one ask at once; 15 s leaves a loaded machine (load
~25 on 2 cores) room to schedule its thread, since a supervisor that had not taken it by
then would see it withdrawn and the case not reached. The caller then waits this long, and
the grace after it, before it gives up."""

GONE = "gone-host:4242:abcd"
"""The owner of the orphan: a runtime that is gone (it left no lease)."""


class Holder:
    """A subscriber that holds the supervisor's thread at the first event of ``agent``,
    until ``gate`` is set."""

    def __init__(self, agent: str) -> None:
        self.agent = agent
        self.holding = threading.Event()
        self.gate = threading.Event()

    def __call__(self, event: Event) -> None:
        if event.agent == self.agent and not self.holding.is_set():
            self.holding.set()
            assert self.gate.wait(WAIT)


def quick(ctx: AgentContext) -> str:
    return "held the supervisor"


def _orphan(db: Path) -> str:
    store = SQLiteStore(db)
    run_id = "r-orphan"
    store.save_run(
        RunRecord(
            run_id=run_id, agent="quick", task="t", root_run_id=run_id, status=RunStatus.RUNNING,
            created_at=time.time(), started_at=time.time(), owner=GONE,
        )
    )  # fmt: skip
    store.close()
    return run_id


def _runtime(store: SQLiteStore) -> Runtime:
    agents = [AgentSpec(name="quick", description="answers"), FunctionAgent.create("hold", quick)]
    model = ScriptedModel({"quick": [{"text": "quick {task}"}]})
    return Runtime(agents, model=model, store=store, restore=False, **QUIET)


def test_a_restore_the_supervisor_had_not_taken_is_withdrawn_nothing_taken(
    tmp_path: Path,
) -> None:
    orphan = _orphan(tmp_path / "runs.db")
    store = SQLiteStore(tmp_path / "runs.db")
    holder = Holder("hold")
    try:
        with _runtime(store) as rt:
            rt.subscribe(holder)
            try:
                held = rt.spawn("hold", "the supervisor is held at its first event")
                assert holder.holding.wait(WAIT)
                with pytest.raises(TimeoutError) as timed_out:
                    rt._requests.restore(None, timeout=0.1)
            finally:
                holder.gate.set()
            assert held.result(timeout=WAIT).status is RunStatus.COMPLETED
            # asked after the withdrawn restore: the supervisor's inbox is handled in order,
            # so the withdrawn one was handled (dropped) before this one is answered
            rt.stats()
            record = store.get_run(orphan)
            assert record is not None and record.owner == GONE  # not taken up
            assert record.status is RunStatus.RUNNING  # nor ended: still an orphan
            message = str(timed_out.value)
            assert message.startswith("restore of the store's orphaned runs: the supervisor")
            assert "no run was taken up: they stay orphaned in the store" in message
            supervisor = rt._hosting.supervisor
            assert supervisor is not None and len(supervisor.claims) == 0
            # restoring again is safe: it takes the orphan up, once, and finishes it
            report = rt._requests.restore(None)
            assert report.resumed == [orphan]
            assert rt.attach(orphan).result(timeout=WAIT).result == "quick t"
    finally:
        holder.gate.set()
        store.close()


def test_a_restore_the_supervisor_took_and_did_not_answer_says_it_may_still_take_runs(
    tmp_path: Path,
) -> None:
    orphan = _orphan(tmp_path / "runs.db")
    store = SQLiteStore(tmp_path / "runs.db")
    holder = Holder("quick")  # holds the supervisor INSIDE the restore (its start's event)
    try:
        with _runtime(store) as rt:
            rt.subscribe(holder)
            failed: list[BaseException] = []

            def restore() -> None:
                try:
                    rt._requests.restore([orphan], timeout=TAKEN_WITHIN, grace=0.1)
                except BaseException as exc:
                    failed.append(exc)

            caller = threading.Thread(target=restore)
            try:
                caller.start()
                assert holder.holding.wait(WAIT)  # claimed: being decided
                caller.join(WAIT)  # its timeout (WAIT) and grace pass: it gives up
            finally:
                holder.gate.set()
                caller.join(WAIT)
            [error] = failed
            assert isinstance(error, TimeoutError)
            message = str(error)
            assert message.startswith(f"restore of the store's orphaned trees {orphan}:")
            assert "it may still take up those runs" in message
            # the listing it names reads this runtime's store, not the terminal's default
            assert f"(`subagents ps --all --state {shlex.quote(str(store.path))}`)" in message
            # it did: taken up and finished here
            assert rt.attach(orphan).result(timeout=WAIT).result == "quick t"
            supervisor = rt._hosting.supervisor
            assert supervisor is not None and len(supervisor.claims) == 0
    finally:
        holder.gate.set()
        store.close()
