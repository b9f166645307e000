"""A `subagents stop` made while a runtime cannot write (its lease lapsed meanwhile) is not
overwritten when the runtime's store comes back, and the runtime knows it lost its lease.

The runtime's store fails (another connection holds SQLite's write lock: every write of
the runtime fails after its busy timeout), so the run it holds is stopped and its caller
told it failed; its lease keeper cannot renew, and the lease lapses. The connection holding
the lock is `subagents stop`'s own transaction of the orphaned run (``cli.orphan_stop``:
the same call, on the same store): it ends the run CANCELLED and releases the lapsed lease.
The runtime's recovery was decided from what it held (the run, to be recorded FAILED with
the store's error); its write is refused by the fence (the lease is gone), so the stop's
CANCELLED stays. And the runtime has lost its lease for good, whichever notices first (the
recovery's write, or the lease keeper's renewal): a spawn is refused with that, not with
the store's old error, as if the store still failed and might yet come back (before, a
fenced recovery was taken for the store still failing; a renewal refused during the outage
changed nothing of what the runtime said).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
import structlog

from pgserver import PASSWORD
from polling import wait_until
from subagents import FunctionAgent, Runtime, SQLiteStore
from subagents.behaviour.function import AgentContext
from subagents.cli.orphan_stop import end_orphaned
from subagents.messages import RunStatus
from subagents.runtime import AdmissionError, RunHandle
from subagents.store.leases import boot_clock

WAIT = 60.0
QUIET = {"command_poll_s": 3600, "sweep_every_s": 3600}


def leaf(ctx: AgentContext) -> str:
    return "ok"


class Stopped:
    """A runtime on a SQLite file (``lease_s``) hosting one run (``first``), whose store
    failed; meanwhile its lease lapsed and `subagents stop` ended the run (``stop``)."""

    def __init__(self, db: Path, lease_s: float) -> None:
        self.gate = threading.Event()

        def holds(ctx: AgentContext) -> str:
            self.gate.wait(WAIT)
            return "held"

        agents = [FunctionAgent.create("holds", holds), FunctionAgent.create("leaf", leaf)]
        self.store = SQLiteStore(db, busy_timeout=0.05)
        self.outside = SQLiteStore(db, busy_timeout=WAIT)  # `subagents stop`'s store
        self.rt = Runtime(agents, store=self.store, lease_s=lease_s, **QUIET)
        self.first: RunHandle | None = None
        self.others: list[RunHandle] = []

    def stop(self, *, lapse_now: bool, others: int = 0) -> str:
        """The store fails under the run (its caller told so); then, in the transaction
        that held the store's write lock, its lapsed lease is seen and the run stopped as
        an orphan. ``lapse_now``: the lease is written as it stands once lapsed (what a
        stall of ``lease_s`` does; its keeper's next renewal is far off), else the lapse is
        waited for. ``others``: roots held besides, which the stop leaves (``others``)."""
        rt, outside = self.rt, self.outside
        self.first = first = rt.spawn("holds", "first")
        assert first.wait_admitted() is RunStatus.RUNNING
        self.others = [rt.spawn("holds", f"other {i}") for i in range(others)]
        assert all(o.wait_admitted() is RunStatus.RUNNING for o in self.others)
        with outside.batch():
            outside.leases()  # its transaction begins: the write lock is held from here
            failing = rt.spawn("leaf", "its write fails")
            with contextlib.suppress(AdmissionError):  # (or failed: its write was refused)
                failing.result(WAIT)
            for handle in (first, *self.others):
                told = handle.result(WAIT)
                assert (told.status, told.error_kind) == (RunStatus.FAILED, "store")
            [lease] = [lease for lease in outside.leases() if lease.owner == rt.owner]
            if lapse_now:
                lapsed = time.time() - 1
                assert outside.renew_lease(
                    msgspec.structs.replace(
                        lease, renewed_at=lapsed, expires_at=lapsed, expires_boot=boot_clock() - 1
                    )
                )
            else:
                wait_until(lambda: time.time() > lease.expires_at + 0.1, "the lease to lapse")
            stopped = end_orphaned(outside, first.run_id)
            assert stopped is not None, "the run was not seen orphaned"
            assert [r.status for r in stopped] == [RunStatus.CANCELLED]
        self.gate.set()  # (its agent was stopped: its thread leaves, whatever it returns)
        return first.run_id

    def assert_stop_kept_and_lease_lost(self, run_id: str) -> None:
        record = self.outside.get_run(run_id)
        assert record is not None and record.status is RunStatus.CANCELLED, record
        again = self.rt.spawn("leaf", "after")
        try:
            outcome = again.result(WAIT)
        except AdmissionError as exc:
            assert "lost its lease" in str(exc), exc
        else:
            raise AssertionError(f"a spawn was taken on after the lease was lost: {outcome}")

    def close(self) -> None:
        self.gate.set()
        self.rt.close(timeout=WAIT)
        self.outside.close()
        self.store.close()


@pytest.fixture
def stopped(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Stopped]:
    held = Stopped(tmp_path / "runs.db", lease_s=request.param)
    try:
        yield held
    finally:
        held.close()


@pytest.mark.parametrize("stopped", [600.0], indirect=True)
def test_the_recovery_finds_the_lease_gone_and_keeps_the_stop(stopped: Stopped) -> None:
    """Only the recovery's write can notice: the lease keeper's next renewal is 200 s off."""
    run_id = stopped.stop(lapse_now=True)
    stopped.rt.stats()  # an ask tries the store first: the recovery's write, fenced
    stopped.assert_stop_kept_and_lease_lost(run_id)


@pytest.mark.parametrize("stopped", [1.5], indirect=True)
def test_the_lease_keeper_finds_the_lease_gone_during_the_outage(stopped: Stopped) -> None:
    """The keeper's renewal is refused first (its thread ends once it told the supervisor),
    before anything asks the supervisor to try its store again."""
    run_id = stopped.stop(lapse_now=False)
    keeper = stopped.rt._hosting.lease
    assert keeper is not None
    keeper.thread.join(WAIT)
    assert not keeper.thread.is_alive()
    stopped.assert_stop_kept_and_lease_lost(run_id)


@pytest.mark.parametrize("stopped", [600.0], indirect=True)
def test_a_close_after_the_lease_found_lost_names_the_runs_nobody_took(
    stopped: Stopped,
) -> None:
    """`subagents stop` ended one of the runtime's two roots as an orphan (releasing its
    lease); the other stays unfinished in the store, its caller told it failed (and that a
    restore runs it again), and no process took it over. The close cannot record it (the
    lease is gone for good), but says so, as a close that could not record its runs does:
    one error naming it. (Before e-edges5 the close named it, after its timeout; with the
    lost lease found at the recovery, the close left it unsaid.)"""
    run_id = stopped.stop(lapse_now=True, others=1)
    stopped.rt.stats()  # an ask tries the store first: the recovery's write, fenced
    stopped.assert_stop_kept_and_lease_lost(run_id)
    [other] = stopped.others
    record = stopped.outside.get_run(other.run_id)
    assert record is not None and record.status is RunStatus.RUNNING  # (nobody's now)
    saved = structlog.get_config()
    structlog.reset_defaults()
    try:
        with structlog.testing.capture_logs() as logs:
            stopped.rt.close(timeout=WAIT)
    finally:
        structlog.configure(**saved)
    [said] = [e for e in logs if "no process took them over" in e["event"]]
    assert said["runs"] == [other.run_id] and said["log_level"] == "error"
    assert "subagents stop RUN" in said["event"]


def test_on_postgresql_the_stop_is_kept_and_the_lease_lost(pg_url: str) -> None:
    """The same on a shared PostgreSQL database: the runtime connects as a role of its own,
    whose sessions the test makes read-only (and ends, so that they come back so), as a
    host cut off from the primary would find its writes refused; `subagents stop` runs
    on another session, which still writes."""
    import psycopg

    from subagents.store.postgres import PostgresStore

    db = pg_url.rsplit("/", 1)[1]
    role = f"host_{db}"  # (roles are the server's: one per test database)
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE \"{role}\" LOGIN PASSWORD '{PASSWORD}'")
        admin.execute(f'GRANT ALL ON DATABASE "{db}" TO "{role}"')
        admin.execute(f'GRANT ALL ON SCHEMA public TO "{role}"')
    host_url = pg_url.replace("postgres:", f"{role}:", 1)  # (the same password)
    gate = threading.Event()

    def holds(ctx: AgentContext) -> str:
        gate.wait(WAIT)
        return "held"

    def host_sessions(conn: psycopg.Connection[object], read_only: bool) -> None:
        value = "on" if read_only else "off"
        conn.execute(f'ALTER ROLE "{role}" SET default_transaction_read_only = {value}')
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s",
            (role,),
        )

    agents = [FunctionAgent.create("holds", holds), FunctionAgent.create("leaf", leaf)]
    store = PostgresStore(host_url)  # (creates the schema: the host's role owns it)
    outside = PostgresStore(pg_url)  # `subagents stop`'s store
    rt = Runtime(agents, store=store, lease_s=600, **QUIET)
    try:
        first = rt.spawn("holds", "first")
        assert first.wait_admitted() is RunStatus.RUNNING
        with psycopg.connect(pg_url, autocommit=True) as admin:
            host_sessions(admin, read_only=True)
            failing = rt.spawn("leaf", "its write fails")
            with contextlib.suppress(AdmissionError):
                failing.result(WAIT)
            told = first.result(WAIT)
            assert (told.status, told.error_kind) == (RunStatus.FAILED, "store")
            [lease] = [lease for lease in outside.leases() if lease.owner == rt.owner]
            lapsed = time.time() - 1
            assert outside.renew_lease(
                msgspec.structs.replace(
                    lease, renewed_at=lapsed, expires_at=lapsed, expires_boot=boot_clock() - 1
                )
            )
            stopped = end_orphaned(outside, first.run_id)
            assert stopped is not None, "the run was not seen orphaned"
            assert [r.status for r in stopped] == [RunStatus.CANCELLED]
            host_sessions(admin, read_only=False)
        gate.set()
        rt.stats()  # an ask tries the store first: the recovery's write, fenced
        record = outside.get_run(first.run_id)
        assert record is not None and record.status is RunStatus.CANCELLED, record
        again = rt.spawn("leaf", "after")
        with pytest.raises(AdmissionError, match="lost its lease"):
            again.result(WAIT)
    finally:
        gate.set()
        rt.close(timeout=WAIT)
        outside.close()
        store.close()
