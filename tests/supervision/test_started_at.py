"""A run's ``started_at`` is its first start: a restart, and a restore after its runtime was
lost (`subagents resume`), keep it, so its elapsed time counts its whole life. The core is
driven without threads; its wall clock (``now``) is moved by hand."""

from __future__ import annotations

from subagents.definitions.spec import AgentSpec
from subagents.messages import RunFinished, SpawnRequest, new_id
from subagents.store.memory import MemoryStore
from subagents.supervision.core import SupervisorCore
from subagents.supervision.effects import ScheduleRestart, StartRun

from .test_core import Clock, Driven, of

SPECS = {"lead": AgentSpec(name="lead", description="d", restart="transient")}


def _driven(store: MemoryStore, now: Clock) -> Driven:
    core = SupervisorCore(
        lookup=SPECS.get,
        names=lambda: list(SPECS),
        read_run=store.get_run,
        clock=Clock(),
        now=now,
        owner="host:1",
    )
    return Driven(core, store)


def _started(store: MemoryStore, run_id: str) -> float | None:
    record = store.get_run(run_id)
    assert record is not None
    return record.started_at


def test_a_restart_keeps_the_first_start() -> None:
    store, now = MemoryStore(), Clock()
    driven = _driven(store, now)
    reply, _ = driven.spawn(SpawnRequest(request_id=new_id("q"), agent="lead", task="t"))
    run_id = reply.run_id
    assert run_id is not None and _started(store, run_id) == now.now
    first = now.now
    now.now += 60.0
    effects = driven.finished(RunFinished(run_id=run_id, error_kind="crash", error="x", attempt=1))
    assert of(effects, ScheduleRestart) != []
    assert [s.record.run_id for s in of(driven.restart_due(run_id), StartRun)] == [run_id]
    record = store.get_run(run_id)
    assert record is not None and record.restarts == 1
    assert record.started_at == first


def test_a_restore_after_a_crash_keeps_the_first_start() -> None:
    store, now = MemoryStore(), Clock()
    reply, _ = _driven(store, now).spawn(
        SpawnRequest(request_id=new_id("q"), agent="lead", task="t")
    )
    run_id = reply.run_id
    assert run_id is not None
    first = now.now
    now.now += 3600.0  # the runtime died; an hour later another one takes the run up
    report, effects = _driven(store, now).restore()
    assert list(report.resumed) == [run_id]
    assert [s.record.run_id for s in of(effects, StartRun)] == [run_id]
    assert _started(store, run_id) == first
