"""A durable ping-pong's events as the store reads them (``subagents log`` reads a run's
through ``RunStore.events``; ``subagents events``, ``ps --watch`` and the console through
``events_after``) are the events its subscribers were handed, in the same order, though the
supervisor's groups keep a run's events of a group as one row (store/sqlite_event_groups.py).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from subagents.behaviour.function import AgentContext
from subagents.messages import EventKind, Mail, RunStatus
from subagents.runtime import Runtime
from subagents.store.sqlite import SQLiteStore

from .conftest import WAIT, Events

pytestmark = pytest.mark.usefixtures("no_new_threads")

ROUNDS = 30


async def _root(ctx: AgentContext) -> str:
    ponger_id: str = await ctx.spawn("ponger", "pong", background=True)
    out = await ctx.spawn("pinger", ponger_id)
    return str(out.result)


async def _ponger(ctx: AgentContext) -> str:
    for _ in range(ROUNDS):
        mail: Mail | None = await ctx.receive(timeout=WAIT)
        assert mail is not None
        ctx.send(mail.sender, f"pong {mail.content}")
    return "ponged"


async def _pinger(ctx: AgentContext) -> str:
    for i in range(ROUNDS):
        ctx.send(ctx.task, f"ping {i}")
        mail: Mail | None = await ctx.receive(timeout=WAIT)
        assert mail is not None
    return "pinged"


def test_a_durable_pingpongs_events_read_back_as_its_subscribers_saw_them(
    tmp_path: Path,
) -> None:
    """Every event handed to a subscriber of every kind, in the order handed, is what the
    file reads: all runs' (``events_after``, paged) and each run's (``events``). Seen failing
    with a group row's events numbered from its first event (the pinger's and the ponger's
    mail events out of their order)."""
    path = tmp_path / "runs.db"
    events = Events()
    agents = {"root": _root, "pinger": _pinger, "ponger": _ponger}
    with Runtime(agents, store=SQLiteStore(path)) as rt:
        rt.subscribe(events)
        outcome = rt.spawn("root", "go").result(WAIT)
        assert outcome.status is RunStatus.COMPLETED, outcome
        events.wait_count(EventKind.COMPLETED, "root", 1)
    seen = events.snapshot()
    assert len([e for e in seen if e.kind is EventKind.MAIL_SENT]) >= 2 * ROUNDS
    conn = sqlite3.connect(path)
    grouped = conn.execute("SELECT count(*) FROM events WHERE kind = 'events'").fetchone()[0]
    conn.close()
    assert grouped > 0  # the supervisor's groups were kept as group rows: what is tested
    store = SQLiteStore(path)
    try:
        paged, after = [], 0
        while page := store.events_after(after, limit=7):
            paged.extend(page)
            after = page[-1].seq
        assert [s.seq for s in paged] == list(range(1, len(paged) + 1))
        assert [s.event for s in paged] == seen
        for run_id in {e.run_id for e in seen}:
            assert store.events(run_id) == [e for e in seen if e.run_id == run_id]
    finally:
        store.close()
