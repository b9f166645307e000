"""The lease clock: a step of the wall clock neither takes a live host's runs nor keeps a
stalled host's runs from being taken, on the host's own machine.

Leases are timed by the wall clock (the one clock hosts on several machines share), and it
steps. A runtime started just after a step forward of more than what is left of a lease
(``restore=True``, the default) read every live host's lease as lapsed and took its runs
over: the host, fenced at its next write, failed them all. A step back kept a host stalled
past its lease looking alive that much longer, its runs untaken. A lease now carries its
deadline on the boot clock too (``CLOCK_BOOTTIME``: one clock for every process of a boot,
which no step moves), and a reader on its machine decides by it (``store.leases.lapsed``).

Real processes on a SQLite file and on a PostgreSQL database (its takeover decides which
leases lapsed the same way): the host is test_fencing's (runs held at a gate), the
runtime starting after the step is a process whose ``time.time`` is moved by an hour
(stepped_clock_job.py), as a step moves it for every process, the boot clock left alone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

from pgserver import stop_outside_a_transaction
from polling import wait_until
from subagents.messages import RunStatus
from subagents.store.base import RunStore
from subagents.store.leases import Liveness
from subagents.store.locations import store_location
from subagents.store.opening import open_location

HERE = Path(__file__).parent
SRC = str(HERE.resolve().parents[1] / "src")
ENV = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
RUNS = 2
HOUR = 3600.0
WAIT = 120.0


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The store of the test: a SQLite file, or a PostgreSQL database of its own."""
    if request.param == "postgres":
        return str(request.getfixturevalue("pg_url"))
    return str(tmp_path / "runs.db")


def _open(db: str) -> RunStore:
    return open_location(store_location(db))


def _start_host(db: str, gate: Path, lease_s: float) -> subprocess.Popen[str]:
    command = [sys.executable, str(HERE / "fence_job.py"), str(db), str(gate), str(RUNS)]
    host = subprocess.Popen(
        [*command, str(lease_s)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=ENV,
    )  # fmt: skip
    assert host.stdout is not None
    line = host.stdout.readline()
    if line.strip() != "ready":
        host.kill()
        raise AssertionError(f"the host did not start: {line!r} {host.communicate()[1]}")
    return host


def _start_after_a_step(db: str, gate: Path, shift: float) -> dict[str, Any]:
    """A runtime's start (and restore) in a process whose wall clock is ``shift`` s off."""
    job = [sys.executable, str(HERE / "stepped_clock_job.py"), str(db), str(gate), str(shift)]
    done = subprocess.run(job, capture_output=True, text=True, env=ENV, timeout=WAIT * 2)
    assert done.returncode == 0, done.stderr
    said: dict[str, Any] = msgspec.json.decode(done.stdout.strip().splitlines()[-1])
    return said


def _ended(host: subprocess.Popen[str]) -> None:
    if host.poll() is None:
        os.kill(host.pid, signal.SIGCONT)
        host.kill()
        host.wait()


def test_a_step_forward_takes_no_run_of_a_live_host(tmp_path: Path, db: str) -> None:
    gate, opened = tmp_path / "gate", tmp_path / "open"
    opened.touch()  # the runs a wrongful restore took would end at once, not hang it
    host = _start_host(db, gate, lease_s=60)  # renewed every 20 s: never lapses here
    store = _open(db)
    try:
        runs = sorted(r.run_id for r in store.list_runs())
        assert len(runs) == RUNS
        said = _start_after_a_step(db, opened, HOUR)
        assert said["resumed"] == [] and sorted(said["elsewhere"]) == runs  # left to the host
        gate.touch()  # the host's runs end, under it
        out, err = host.communicate(timeout=WAIT)
        assert host.returncode == 0, err
        told = msgspec.json.decode(out.strip().splitlines()[-1])
        assert [status for status, _error in told] == ["completed"] * RUNS  # not fenced
        owner = {r.owner for r in store.list_runs()}
        for run_id in runs:
            record = store.get_run(run_id)
            assert record is not None and record.status is RunStatus.COMPLETED
        assert len(owner) == 1  # nobody else's
    finally:
        _ended(host)
        store.close()


def test_a_stalled_host_is_taken_over_though_the_clock_stepped_back(
    tmp_path: Path, db: str
) -> None:
    gate, opened = tmp_path / "gate", tmp_path / "open"
    opened.touch()
    host = _start_host(db, gate, lease_s=1.0)
    store = _open(db)
    try:
        runs = sorted(r.run_id for r in store.list_runs())
        stop_outside_a_transaction(db, host.pid)  # alive, renewing nothing
        wait_until(
            lambda: all(Liveness(store.leases()).orphaned(r) for r in store.list_runs()),
            "the stopped host's lease lapsing",
        )
        said = _start_after_a_step(db, opened, -HOUR)
        assert sorted(said["resumed"]) == runs  # taken up, as without the step
        assert said["ended"] == {run_id: "completed" for run_id in runs}
    finally:
        _ended(host)
        store.close()
