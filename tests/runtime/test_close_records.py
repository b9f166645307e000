"""A close of many waiting runs on SQLite (``closing.close_all``): every run ends recorded
cancelled, its outcome kept and said delivered in that one write (nothing for a later
runtime to hand again or take up), its ``cancelled`` event kept once, its caller told; a
close after the close does nothing."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from subagents.behaviour.function import AgentContext
from subagents.messages import Event, EventKind, RunStatus
from subagents.runtime import Runtime
from subagents.store.sqlite import SQLiteStore
from subagents.supervision.limits import Limits

from .conftest import WAIT

pytestmark = pytest.mark.usefixtures("no_new_threads")

N = 120


async def idle(ctx: AgentContext) -> str:
    mail = await ctx.receive(timeout=600)
    return "mail" if mail is not None else "none"


def test_a_close_on_sqlite_records_every_waiting_runs_end_once_delivered(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    waiting = threading.Semaphore(0)

    def on_event(event: Event) -> None:
        if event.kind is EventKind.WAITING:
            waiting.release()

    limits = Limits(max_concurrency=N, per_agent=N, queue_bound=N)
    store = SQLiteStore(path)
    rt = Runtime([idle], limits=limits, store=store, restore=False)
    rt.subscribe(on_event)
    handles = [rt.spawn("idle", str(i)) for i in range(N // 2)]
    handles += [h for h in rt.spawn_many([("idle", f"m{i}") for i in range(N // 2)])]
    for _ in range(N):
        assert waiting.acquire(timeout=WAIT)
    rt.close(timeout=WAIT)
    rt.close(timeout=WAIT)  # a close after the close: nothing more
    ids = sorted(h.run_id for h in handles)
    assert all(h.result(timeout=WAIT).status == "cancelled" for h in handles)
    reopened = SQLiteStore(path)
    try:
        records = [reopened.get_run(run_id) for run_id in ids]
        assert [r.status if r else None for r in records] == [RunStatus.CANCELLED] * N
        assert all(r is not None and r.outcome is not None for r in records)
        assert reopened.undelivered_outcomes() == []  # no restore hands any again
        assert reopened.list_runs(statuses=[RunStatus.WAITING, RunStatus.RUNNING]) == []
        for run_id in ids:
            kinds = [e.kind for e in reopened.events(run_id=run_id)]
            assert kinds.count(EventKind.CANCELLED) == 1, (run_id, kinds)
    finally:
        reopened.close()
