"""A run decided straight (``actors/alone.py``: a root spawn told alone, a run's end with no
group open and nothing queued) and one decided through the general path (spawns queued
together, an end with messages queued behind it: the open group, committed by the next
message) leave the same records and events in a durable store, and each run's end is
committed before its caller is told: a second connection to the store sees it at once.

On PostgreSQL both straight paths are taken (agents tell their reports); on SQLite a run's end
goes through the late reports' line (``group_linger.LateReports``), so only the spawn is
straight there. The general path is forced by holding the supervisor's thread in a
subscriber (on the publication of a run's start) while the run's end and two more spawns are
queued behind it."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import msgspec
import pytest

from polling import wait_until
from subagents import FunctionAgent, Runtime
from subagents.behaviour.function import AgentContext
from subagents.messages import Event, EventKind, RunStatus
from subagents.store.base import RunStore

WAIT = 60.0

VOLATILE = frozenset(
    {"run_id", "root_run_id", "request_id", "task", "created_at", "started_at", "ended_at"}
)
"""What differs between two runs of one agent by nature (ids, the task, the clock)."""


def _echo(ctx: AgentContext) -> str:
    return ctx.task


def _stores(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> tuple[RunStore, Any]:
    """The runtime's store and a second one on the same data (another connection)."""
    if kind == "sqlite":
        from subagents.store.sqlite import SQLiteStore

        return SQLiteStore(tmp_path / "runs.db"), SQLiteStore(tmp_path / "runs.db")
    from subagents.store.postgres import PostgresStore

    url = request.getfixturevalue("pg_url")
    return PostgresStore(url), PostgresStore(url)


def _kept(store: RunStore, run_id: str) -> dict[str, Any]:
    """What ``store`` keeps of a run, without what differs between runs by nature."""
    record = store.get_run(run_id)
    assert record is not None, run_id
    assert record.status is RunStatus.COMPLETED, record
    assert record.outcome is not None and record.outcome.result == record.task
    kept = {k: v for k, v in msgspec.structs.asdict(record).items() if k not in VOLATILE}
    kept["outcome"] = msgspec.structs.replace(record.outcome, run_id="", result="")
    kept["events"] = [
        (e.kind, e.agent, e.depth, {k: v for k, v in e.data.items() if k != "task"})
        for e in store.events(run_id)
    ]
    return kept


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_straight_and_grouped_runs_are_kept_alike_and_committed_before_told(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    store, other = _stores(kind, tmp_path, request)
    armed, held, gate = threading.Event(), threading.Event(), threading.Event()

    def hold(event: Event) -> None:  # the supervisor's thread, publishing a run's start
        if event.kind is EventKind.STARTED and armed.is_set() and not held.is_set():
            held.set()
            assert gate.wait(WAIT)  # meanwhile the run ends, and two spawns queue

    try:
        with Runtime([FunctionAgent.create("echo", _echo)], store=store, command_poll_s=0) as rt:
            rt.subscribe(hold)
            lone = rt.run("echo", "lone", wait=WAIT)  # alone: decided straight
            assert lone.result == "lone"
            seen = {lone.run_id: _kept(other, lone.run_id)}  # committed before told
            armed.set()
            try:
                first = rt.spawn("echo", "first")
                assert held.wait(WAIT)
                supervisor: Any = rt._hosting.supervisor
                inbox = supervisor._ref.actor_inbox  # held: nothing takes from it
                wait_until(lambda: inbox.qsize() >= 1, "the first run's end queued")
                behind = [rt.spawn("echo", "second"), rt.spawn("echo", "third")]
                assert inbox.qsize() >= 3
            finally:
                gate.set()
            for handle in (first, *behind):
                outcome = handle.result(WAIT)
                assert outcome.status is RunStatus.COMPLETED, outcome
                seen[handle.run_id] = _kept(other, handle.run_id)  # committed before told
    finally:
        close = getattr(other, "close", None)
        if close is not None:
            close()
    alike = list(seen.values())
    assert [kept["events"][0][0] for kept in alike] == [EventKind.SPAWNED] * 4
    for kept in alike[1:]:
        assert kept == alike[0]
