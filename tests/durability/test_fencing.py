"""Fencing: a host stalled past its lease writes nothing once its runs were taken over.

The real thing first: a runtime process is stopped (SIGSTOP) longer than its lease, a second
runtime takes its runs up and finishes them, then the first is let go on (SIGCONT). Its
agents finish their work and report, its lease keeper renews: every write it tries is
refused inside the write's transaction (the lease, owner and epoch, is checked there), so
each run ends exactly once, under its new owner, and no record goes back to running. Twice:
with the woken host's lease keeper held from hearing its renewal's answer (a thread
descheduled), so that the fence alone stops the host, every time (without it the test
failed 2 runs in 8: the keeper, renewing at once on waking, was refused and halted the
supervisor before its writes reached the fence); and with the keeper renewing at once,
whichever of the two notices first. Then
the same without a race: a runtime whose lease is released under it (what a takeover does)
while its keeper is far from its next renewal still records nothing of its run's end. Both
on a SQLite file and on a PostgreSQL database (its fence: a row lock on the lease).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
from fence_job import gated_agent

from pgserver import stop_outside_a_transaction
from polling import wait_until
from run_ends import ends_of
from subagents import Runtime, ScriptedModel
from subagents.messages import RunStatus
from subagents.store.base import RunStore
from subagents.store.leases import Liveness
from subagents.store.locations import store_location
from subagents.store.opening import open_location

JOB = Path(__file__).with_name("fence_job.py")
SRC = str(Path(__file__).resolve().parents[2] / "src")
RUNS = 4


@pytest.fixture(params=["sqlite", "postgres"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The store of the test: a SQLite file, or a PostgreSQL database of its own."""
    if request.param == "postgres":
        return str(request.getfixturevalue("pg_url"))
    return str(tmp_path / "runs.db")


def _open(where: str) -> RunStore:
    return open_location(store_location(where))


@contextlib.contextmanager
def _writes_held(where: str) -> Iterator[None]:
    """Every write of the store waits while inside: SQLite's write lock; PostgreSQL's
    leases table locked against the fence and the renewals (EXCLUSIVE)."""
    if where.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(where) as conn, conn.transaction():
            conn.execute("LOCK TABLE subagents.leases IN EXCLUSIVE MODE")
            yield
        return
    lock = sqlite3.connect(where, isolation_level=None)
    lock.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        lock.execute("ROLLBACK")
        lock.close()


def _start_host(db: str, gate: Path, hold: Path) -> subprocess.Popen[str]:
    """The host (fence_job.py): its lease keeper's renewals held while ``hold`` exists."""
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    host = subprocess.Popen(
        [sys.executable, str(JOB), db, str(gate), str(RUNS), "1", str(hold)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert host.stdout is not None
    line = host.stdout.readline()
    if line.strip() != "ready":
        host.kill()
        raise AssertionError(f"the host did not start: {line!r} {host.communicate()[1]}")
    return host


@pytest.mark.parametrize("keeper", ["held", "renewing"])
def test_a_host_stalled_past_its_lease_writes_nothing_after_it_wakes(
    tmp_path: Path, where: str, keeper: str
) -> None:
    """``held``: the woken host's lease keeper hears no answer to its renewals until the
    host's runs have ended there, so nothing but the fence stands between their ends and the
    store. ``renewing``: it renews at once on waking, and is refused; the store's write lock
    is held until the runs have got past their gate, so that their ends are on their way."""
    db, gate, hold = where, tmp_path / "gate", tmp_path / "hold"
    host = _start_host(db, gate, hold)
    store = _open(db)
    try:
        runs = store.list_runs()
        assert len(runs) == RUNS and {r.status for r in runs} == {RunStatus.RUNNING}
        first_owner = runs[0].owner
        # alive, but renewing nothing (between writes: on PostgreSQL a host stopped inside a
        # transaction holds its lease row, and the restore would leave its runs to it)
        stop_outside_a_transaction(db, host.pid)
        wait_until(
            lambda: all(Liveness(store.leases()).orphaned(r) for r in store.list_runs()),
            "the stopped host's lease lapsing",
        )
        if keeper == "held":
            hold.touch()  # (the host is stopped: no answer reaches its keeper after it wakes)
        gate.touch()  # the work may end now: the taker's, and the stopped host's once woken
        with Runtime(
            [gated_agent(gate)], model=ScriptedModel(), store=_open(db), lease_s=30
        ) as taker:
            assert sorted(taker.restore_report.resumed) == sorted(r.run_id for r in runs)
            for r in runs:
                assert taker.attach(r.run_id).result(timeout=120).status is RunStatus.COMPLETED
            second_owner = taker.owner
            # The first host wakes while the taker lives. Renewing, its keeper would learn of
            # the takeover at once: the store's write lock is held until its runs have got
            # past the gate, so that their ends are on their way to its supervisor by then.
            with _writes_held(db) if keeper == "renewing" else contextlib.nullcontext():
                os.kill(host.pid, signal.SIGCONT)
                wait_until(
                    lambda: len(list(tmp_path.glob(f"gate.{host.pid}.*"))) == RUNS,
                    "the woken host's runs getting past the gate",
                )
            out, err = host.communicate(timeout=120)
        assert host.returncode == 0, err
    finally:
        if host.poll() is None:
            os.kill(host.pid, signal.SIGCONT)
            host.kill()
            host.wait()
    for r in runs:
        record = store.get_run(r.run_id)
        assert record is not None
        assert (record.status, record.owner) == (RunStatus.COMPLETED, second_owner)
        assert record.outcome is not None and record.outcome.result == f"done {r.task}"
        ends = ends_of(store, r.run_id)
        assert len(ends) == 1, [e.kind for e in store.events(r.run_id)]  # it ended once
    assert second_owner != first_owner
    told = msgspec.json.decode(out.strip().splitlines()[-1])
    assert [status for status, _error in told] == ["failed"] * RUNS
    assert all("lost its lease" in error for _status, error in told)
    if keeper == "held":  # the fence said it: the keeper heard nothing yet
        assert all("fenced: the lease of" in error for _status, error in told), told
    said = [line for line in err.splitlines() if "lost its lease" in line]
    assert len(said) == 1, err  # the fenced host says so in one log line
    store.close()


def test_a_runtime_whose_lease_was_taken_records_nothing_of_its_runs_end(
    tmp_path: Path, where: str
) -> None:
    """No race with the lease keeper: its next renewal is 200 s away, so only the fence in
    the write's transaction can keep the run's end from being recorded."""
    db, gate = where, tmp_path / "gate"
    store = _open(db)
    started = threading.Event()
    with Runtime([gated_agent(gate)], model=ScriptedModel(), store=store, lease_s=600) as rt:
        rt.subscribe(lambda e: started.set() if e.kind == "started" else None)
        handle = rt.spawn("gated", "t")
        assert started.wait(60)
        taker = _open(db)
        taker.release_lease(rt.owner)  # what a resume that took its runs over does
        taker.close()
        gate.touch()  # the run ends now; its report reaches the supervisor
        outcome = handle.result(timeout=60)
        assert outcome.status is RunStatus.FAILED
        assert outcome.error is not None and "lost its lease" in outcome.error
    record = store.get_run(handle.run_id)
    assert record is not None and record.status is RunStatus.RUNNING  # left to its taker
    assert ends_of(store, handle.run_id) == []
    store.close()
