"""A root's end in a PostgreSQL batch whose ``COMMIT`` answer was lost: its caller is told
what the database keeps, as for the cluster's head lost mid-commit.

The connection is cut by a real TCP proxy at the ``COMMIT`` of the batch holding the root's
end (tests/tcp_cut.py): after the server committed it, or before it reached the server. The
store raises ``UnsureWrite``; the runtime holds the root's caller until the database answers
again and then tells it what it keeps (``actors.outage``). Before, the store raised a plain
``StoreError``: the caller was told at once that the run failed and "its end is not
recorded yet", while the database kept it completed.
"""

from __future__ import annotations

import threading

import pytest

from pgserver import PgServer
from polling import wait_until
from run_ends import ends_of
from subagents import FunctionAgent, Runtime
from subagents.behaviour.function import AgentContext
from subagents.messages import EventKind, RunStatus
from subagents.store.postgres import PostgresStore
from tcp_cut import CommitCutter

WAIT = 60.0


def _answer(ctx: AgentContext) -> str:
    return f"answer-of-{ctx.task}"


@pytest.mark.parametrize("applied", [True, False], ids=["applied", "not applied"])
def test_a_roots_end_in_a_lost_commit_is_told_as_the_database_keeps_it(
    pg_server: PgServer, pg_url: str, applied: bool
) -> None:
    cutter = CommitCutter(("127.0.0.1", pg_server.port))
    try:
        agents = [FunctionAgent.create("answer", _answer)]
        url = cutter.url(pg_url)
        with Runtime(agents, store=url, command_poll_s=0.1) as rt:
            cutter.arm(b"answer-of-lost", applied=applied)  # in the batch of the root's end
            handle = rt.spawn("answer", "lost")
            outcome = handle.result(timeout=WAIT)
            assert cutter.cut.is_set()
            again = rt.run("answer", "again", timeout=WAIT)  # the runtime goes on
            attached = rt.attach(handle.run_id).result(timeout=WAIT)
    finally:
        cutter.close()
    store = PostgresStore(pg_url)
    try:
        record = store.get_run(handle.run_id)
        kept = RunStatus.COMPLETED if applied else RunStatus.FAILED
        assert record is not None and record.status is kept
        assert outcome.status is kept and attached.status is kept, outcome
        ends = ends_of(store, handle.run_id)
        assert ends == [EventKind(kept.value)]  # recorded once
        assert again.status is RunStatus.COMPLETED
        if applied:
            assert outcome.result == "answer-of-lost"
        else:
            assert outcome.error is not None and "may or may not" in outcome.error
            assert "not recorded" not in outcome.error  # told once it was recorded
    finally:
        store.close()


def test_a_late_commit_of_a_roots_end_after_the_recovery_recorded_it_is_refused(
    pg_server: PgServer, pg_url: str
) -> None:
    """The ``COMMIT`` of a root's end is still on its way when its client gives up: the
    connection is cut on the client's side, the transaction stays open at the server, and
    its writes and ``COMMIT`` reach the server only after the runtime's recovery recorded
    the root failed. The server refuses that late end (a second one): the run's events hold
    one end, and its record agrees with them and with what its caller was told. Before, the
    late ``COMMIT`` landed: the events held ``failed`` then ``completed``, the record said
    completed, and the caller had been told failed."""
    cutter = CommitCutter(("127.0.0.1", pg_server.port))
    try:
        agents = [FunctionAgent.create("answer", _answer)]
        with Runtime(agents, store=cutter.url(pg_url), command_poll_s=0.1) as rt:
            cutter.arm(b"answer-of-late", late=True)  # in the batch of the root's end
            handle = rt.spawn("answer", "late")
            outcome = handle.result(timeout=WAIT)  # told once the recovery recorded it
            assert cutter.cut.is_set() and not cutter.landed.is_set()
            cutter.release()
            assert cutter.landed.wait(WAIT), "the late COMMIT's answer"
            again = rt.run("answer", "again", timeout=WAIT)  # the runtime goes on
    finally:
        cutter.close()
    assert cutter.answer is not None and "a second end (completed) is refused" in cutter.answer
    store = PostgresStore(pg_url)
    try:
        record = store.get_run(handle.run_id)
        assert record is not None and record.status is RunStatus.FAILED
        ends = ends_of(store, handle.run_id)
        assert ends == [EventKind.FAILED]  # one end, the one that landed first
        assert outcome.status is RunStatus.FAILED and outcome.error is not None
        assert "may or may not be recorded" not in outcome.error  # told once recorded
        assert again.status is RunStatus.COMPLETED
    finally:
        store.close()


def test_a_late_commit_of_a_live_save_after_the_recovery_ended_the_run_is_refused(
    pg_server: PgServer, pg_url: str
) -> None:
    """The ``COMMIT`` of a run's wait (a live save of its record) is still on its way when
    its client gives up; the runtime's recovery records the run failed; then the late
    ``COMMIT`` reaches the server. It is refused (an end is not undone): the run stays
    failed, as its caller was told. Before, it landed: the run was live again in the
    database (waiting, this runtime's), its end erased, and a later restore would have run
    it again."""
    cutter = CommitCutter(("127.0.0.1", pg_server.port))
    gate = threading.Event()

    async def waits(ctx: AgentContext) -> str:
        assert gate.wait(WAIT)
        await ctx.receive(timeout=WAIT)  # it waits: its record saved live
        return "read"

    try:
        agents = [FunctionAgent.create("waits", waits), FunctionAgent.create("answer", _answer)]
        with Runtime(agents, store=cutter.url(pg_url), command_poll_s=0.1) as rt:
            handle = rt.spawn("waits", "live-save-late")
            wait_until(lambda: _started(pg_url, handle.run_id), "the run's start recorded")
            cutter.arm(b"live-save-late", late=True)  # in the batch of its wait
            gate.set()
            outcome = handle.result(timeout=WAIT)  # told as the store failed
            assert cutter.cut.is_set() and not cutter.landed.is_set()
            again = rt.run("answer", "again", timeout=WAIT)  # recovered: recorded failed
            cutter.release()
            assert cutter.landed.wait(WAIT), "the late COMMIT's answer"
    finally:
        gate.set()
        cutter.close()
    assert cutter.answer is not None and "a save of it as waiting" in cutter.answer, cutter.answer
    store = PostgresStore(pg_url)
    try:
        record = store.get_run(handle.run_id)
        assert record is not None and record.status is RunStatus.FAILED, record
        assert ends_of(store, handle.run_id) == [EventKind.FAILED]
        assert outcome.status is RunStatus.FAILED
        assert again.status is RunStatus.COMPLETED
    finally:
        store.close()


def _started(url: str, run_id: str) -> bool:
    store = PostgresStore(url)
    try:
        record = store.get_run(run_id)
        return record is not None and record.started_at is not None
    finally:
        store.close()
