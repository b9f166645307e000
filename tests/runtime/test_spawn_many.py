"""``Runtime.spawn_many``: many root runs in one call, refusals per job, limits as ``spawn``'s;
and a runtime closing with many live runs ends each one once, cancelled (``close_all``)."""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

import pytest

from subagents.behaviour.function import AgentContext, FunctionAgent
from subagents.messages import Event, EventKind, RunStatus
from subagents.runtime import AdmissionError, RunHandle, Runtime, RuntimeClosed
from subagents.store.sqlite import SQLiteStore
from subagents.supervision.limits import Limits

from .conftest import TERMINAL, WAIT, Events


def held_agent(release: threading.Event) -> FunctionAgent:
    def held(ctx: AgentContext) -> str:  # a working run (not waiting): it keeps its slot
        assert release.wait(WAIT)
        return f"did {ctx.task}"

    return FunctionAgent.create("held", held)


async def idle(ctx: AgentContext) -> str:
    mail = await ctx.receive(timeout=WAIT * 6)
    return "mail" if mail is not None else "none"


def test_each_job_is_admitted_queued_or_refused_alone() -> None:
    release = threading.Event()
    events = Events()
    limits = Limits(max_concurrency=2, queue_bound=1)
    with Runtime([held_agent(release)], limits=limits) as rt:
        rt.subscribe(events)
        out = rt.spawn_many(
            [
                ("held", "a"),
                ("nobody", "x"),
                ("held", "b"),
                ("held", ""),
                ("held",),
                ("held", "c"),
                ("held", "d"),
            ]
        )
        assert [type(item).__name__ for item in out] == [
            "RunHandle",
            "AdmissionError",
            "RunHandle",
            "AdmissionError",
            "AdmissionError",
            "RunHandle",
            "AdmissionError",
        ]
        assert str(out[1]).startswith("job 1 ('nobody'): unknown agent 'nobody'")
        assert (
            str(out[3])
            == "job 3 ('held'): the task for 'held' is empty: say what the agent should do"
        )
        assert str(out[4]).startswith("job 4: a job is (agent, task)")
        assert str(out[6]).startswith("job 6 ('held'): queue bound")  # c took the one place
        a, b, c = (item for item in out if isinstance(item, RunHandle))
        events.wait_count(EventKind.STARTED, "held", 2)
        assert [e.run_id for e in events.of(EventKind.QUEUED)] == [c.run_id]
        assert {e.run_id for e in events.of(EventKind.SPAWNED)} == {a.run_id, b.run_id, c.run_id}
        assert rt.stats().in_flight == 2 and rt.stats().queued == 1
        release.set()
        for handle, task in ((a, "a"), (b, "b"), (c, "c")):
            outcome = handle.result(WAIT)
            assert outcome.status is RunStatus.COMPLETED and outcome.result == f"did {task}"
        events.wait_for(lambda _: len(events.terminal_counts()) == 3)
        assert set(events.terminal_counts().values()) == {1}
        assert {r.run_id for r in rt.runs()} == {a.run_id, b.run_id, c.run_id}


def test_options_apply_to_every_job_and_a_job_overrides_them() -> None:
    release = threading.Event()
    release.set()
    with Runtime([held_agent(release)]) as rt:
        with pytest.raises(TypeError, match="unexpected keyword arguments: colour"):
            rt.spawn_many([("held", "a")], colour="red")
        out = rt.spawn_many(
            [("held", "a"), ("held", "b", {"label": "own"}), ("held", "c", {"hue": 1})],
            label="common",
        )
        assert isinstance(out[2], AdmissionError)
        assert str(out[2]) == "job 2: unexpected keyword arguments: hue"
        labels = {}
        for item in out[:2]:
            assert isinstance(item, RunHandle)
            assert item.result(WAIT).status is RunStatus.COMPLETED
            record = rt.get(item.run_id)
            assert record is not None
            labels[record.task] = record.label
        assert labels == {"a": "common", "b": "own"}
        assert rt.spawn_many([]) == []
        with pytest.raises(TypeError, match="spawn_many\\(\\) takes an iterable of jobs, got int"):
            rt.spawn_many(5)  # type: ignore[arg-type]
    with pytest.raises(RuntimeClosed):
        rt.spawn_many([("held", "late")])


def test_a_plain_job_whose_agent_or_task_is_no_string_is_refused_alone_naming_it() -> None:
    """A job ``(agent, task)`` with no options makes its request by a short path: a value
    of another type (even one a string would equal) still gets the type check's refusal."""
    release = threading.Event()
    release.set()
    with Runtime([held_agent(release)]) as rt:
        out = rt.spawn_many([(5, "a"), ("held", None), ("held", b"b"), ("held", "c")])  # type: ignore[list-item]
        assert [str(item) for item in out[:3]] == [
            "job 0: agent must be a string, got int",
            "job 1: task must be a string, got NoneType",
            "job 2: task must be a string, got bytes",
        ]
        assert isinstance(out[3], RunHandle)
        assert out[3].result(WAIT).result == "did c"


@pytest.mark.parametrize("store_kind", ["memory", "sqlite"])
def test_closing_ends_every_live_run_once_cancelled(tmp_path: Path, store_kind: str) -> None:
    store = SQLiteStore(tmp_path / "runs.db") if store_kind == "sqlite" else None
    events = Events()
    n = 60
    rt = Runtime([FunctionAgent.create("idle", idle)], store=store, limits=Limits(per_agent=n))
    rt.subscribe(events)
    handles = [h for h in rt.spawn_many([("idle", str(i)) for i in range(n)])]
    events.wait_count(EventKind.WAITING, "idle", n)
    rt.close()
    for handle in handles:
        assert isinstance(handle, RunHandle)
        outcome = handle.result(0)
        assert outcome.status is RunStatus.CANCELLED
        assert outcome.error_kind == "cancelled" and outcome.error == "runtime closed"
    published = Counter(e.run_id for e in events.snapshot() if e.kind in TERMINAL)
    assert published == Counter({h.run_id: 1 for h in handles})  # type: ignore[union-attr]
    if store is not None:  # what the store keeps: one cancelled record and end event each
        reopened = SQLiteStore(tmp_path / "runs.db")
        for handle in handles:
            assert isinstance(handle, RunHandle)
            record = reopened.get_run(handle.run_id)
            assert record is not None and record.status is RunStatus.CANCELLED
            assert record.outcome is not None and record.outcome.error == "runtime closed"
            ends = [e.kind for e in reopened.events(handle.run_id) if e.kind in TERMINAL]
            assert ends == [EventKind.CANCELLED]
        reopened.close()


def test_a_close_that_outlasts_its_timeout_still_records_every_run_cancelled(
    tmp_path: Path,
) -> None:
    """The supervisor is held up (here: by a subscriber) past the close's timeout, as a
    loaded machine or a long inbox holds it up (10,000 runs in SQLite once overran the
    default 10 s): the close waits for the runs' ends instead of closing the store under
    the supervisor's writes, so no run is left unfinished in the store (a later runtime
    would take it up as an orphan and start it again)."""
    n = 20
    rt = Runtime(
        [FunctionAgent.create("idle", idle)], store=tmp_path / "runs.db", limits=Limits(per_agent=n)
    )
    seen, blocked, gate = [0], threading.Event(), threading.Event()

    def hold_the_last(event: Event) -> None:
        if event.kind == EventKind.WAITING:
            seen[0] += 1
            if seen[0] == n:  # on the supervisor's thread: everything after it waits
                blocked.set()
                gate.wait(WAIT)

    rt.subscribe(hold_the_last)
    handles = rt.spawn_many([("idle", str(i)) for i in range(n)])
    assert blocked.wait(WAIT)
    closer = threading.Thread(target=rt.close, kwargs={"timeout": 0.05})
    closer.start()
    closer.join(3.0)  # without the wait for the runs' ends, the close is over by now
    gate.set()
    closer.join(WAIT)
    assert not closer.is_alive()
    reopened = SQLiteStore(tmp_path / "runs.db")
    try:
        statuses: Counter[RunStatus] = Counter()
        for handle in handles:
            assert isinstance(handle, RunHandle)
            record = reopened.get_run(handle.run_id)
            assert record is not None
            statuses[record.status] += 1
        assert statuses == Counter({RunStatus.CANCELLED: n})
    finally:
        reopened.close()
