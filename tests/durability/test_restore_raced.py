"""A restore whose takeover the store refuses because another writer ended a run it takes
up, between the snapshot's read and the takeover's commit (``actors/restored.py``): the
takeover is read and decided again, and the run's end stands; before, the refusal went
through the store outage (every run stopped, the runtime's start failed with a
``StoreError``), or, before the store refused a live save over an end, the takeover's
re-stamp erased that end and ran the run again.

Where that window is: on PostgreSQL (a stranger's end takes no lease lock; here a real
second connection commits it) and on a cluster's store (its batch is no transaction across
calls). SQLite's takeover holds the file's write lock from its first read, so no other
writer's end lands between (nothing to test there); the memory store's batch is its lock:
the stranger writes from inside the takeover's write here (the same object), as a second
writer would between its read and its write.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import msgspec
import pytest

from run_ends import ends_of
from subagents import FunctionAgent, Runtime
from subagents.behaviour.function import AgentContext
from subagents.messages import EventKind, Outcome, RunRecord, RunStatus
from subagents.store.base import RunStore
from subagents.store.memory import MemoryStore

WAIT = 60.0
GONE = "gone-host:4242:abcd"
"""The orphans' owner: a runtime that crashed (no lease left)."""


class _Stranger:
    """Ends ``raced`` through ``other`` (committed at once) when the takeover first saves a
    run live (``r-other``, the older orphan, saved before ``raced``): between the restore's
    read and its write of ``raced`` (in the memory store, a write of the takeover's own
    ``raced`` would be undone with it: ``memory_undo``)."""

    def __init__(self, raced: str) -> None:
        self.raced = raced
        self.other: RunStore | None = None
        self.armed = False
        self.ended: RunRecord | None = None

    def before(self, record: RunRecord) -> None:
        if not self.armed or self.other is None or self.ended is not None:
            return
        if record.run_id != "r-other":
            return
        if record.status.terminal:
            return
        stored = self.other.get_run(self.raced)
        assert stored is not None and stored.owner == GONE  # (what the restore read)
        end = Outcome(run_id=self.raced, status=RunStatus.CANCELLED, error="elsewhere")
        self.ended = msgspec.structs.replace(
            stored, status=RunStatus.CANCELLED, ended_at=time.time(), outcome=end
        )
        with self.other.batch():
            self.other.save_run(self.ended)
            self.other.save_outcome(end)


class _RacedMemory(MemoryStore):
    def __init__(self, stranger: _Stranger) -> None:
        super().__init__()
        self.stranger = stranger

    def save_run(self, record: RunRecord) -> None:
        self.stranger.before(record)
        super().save_run(record)


@pytest.fixture(params=["memory", "postgres"])
def raced(request: pytest.FixtureRequest) -> Iterator[tuple[RunStore, _Stranger]]:
    stranger = _Stranger("r-raced")
    if request.param == "memory":
        store = _RacedMemory(stranger)
        stranger.other = store  # (the same object: its batch is its lock)
        yield store, stranger
        return
    from subagents.store.postgres import PostgresStore

    class _RacedPg(PostgresStore):
        def save_run(self, record: RunRecord) -> None:
            stranger.before(record)
            super().save_run(record)

    url = request.getfixturevalue("pg_url")
    pg = _RacedPg(url)
    stranger.other = other = PostgresStore(url)  # (a second connection: commits at once)
    try:
        yield pg, stranger
    finally:
        other.close()
        pg.close()


def _orphan(store: RunStore, run_id: str, now: float) -> None:
    store.save_run(
        RunRecord(
            run_id=run_id, agent="quick", task=run_id, root_run_id=run_id,
            status=RunStatus.RUNNING, created_at=now, started_at=now, owner=GONE,
        )
    )  # fmt: skip


def _quick(ctx: AgentContext) -> str:
    return f"done {ctx.task}"


def test_a_restore_raced_by_another_writers_end_is_decided_again(
    raced: tuple[RunStore, _Stranger],
) -> None:
    store, stranger = raced
    _orphan(store, "r-other", time.time() - 10)  # (older: taken up first)
    _orphan(store, "r-raced", time.time())
    stranger.armed = True
    agents = [FunctionAgent.create("quick", _quick)]
    with Runtime(agents, store=store, command_poll_s=0) as rt:  # (its start restores)
        report = rt.restore_report
        assert stranger.ended is not None, "the stranger's end was not raced in"
        went_on = rt.attach("r-other").result(timeout=WAIT)
    assert report is not None
    assert report.resumed == ["r-other"], report
    assert went_on.status is RunStatus.COMPLETED and went_on.result == "done r-other"
    kept = store.get_run("r-raced")
    assert kept is not None and stranger.ended is not None
    assert (kept.status, kept.ended_at, kept.owner) == (
        RunStatus.CANCELLED,
        stranger.ended.ended_at,
        GONE,
    )
    assert ends_of(store, "r-raced") == []  # (nothing of the runtime's: not taken up)
    assert ends_of(store, "r-other") == [EventKind.COMPLETED]
