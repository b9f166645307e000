"""A crash between ``Runtime.spawn`` returning and the supervisor committing its decision
leaves nothing of the run (``spawn`` tells and returns before its admission): no record, no
event, nothing to take up; a run whose decision committed before is taken up as usual."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from spawn_many_job import SPECS, model

from subagents import Runtime, SQLiteStore
from subagents.messages import RunStatus

JOB = Path(__file__).with_name("spawn_told_job.py")
TESTS = str(Path(__file__).resolve().parent.parent)


def test_a_crash_before_a_told_spawn_is_decided_leaves_nothing_half_started(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    path = os.pathsep.join([TESTS, os.environ.get("PYTHONPATH", "")])
    job = subprocess.Popen(
        [sys.executable, str(JOB), str(db)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": path},
    )
    assert job.stdin is not None and job.stdout is not None
    try:
        admitted = json.loads(job.stdout.readline())["admitted"]
        lock = sqlite3.connect(db, isolation_level=None)  # nothing commits while held
        lock.execute("BEGIN IMMEDIATE")
        try:
            job.stdin.write("go\n")
            job.stdin.flush()
            told = json.loads(job.stdout.readline())["told"]
            job.send_signal(signal.SIGKILL)
            job.wait(60)
        finally:
            lock.execute("ROLLBACK")
            lock.close()
    finally:
        if job.poll() is None:
            job.kill()
            job.wait(60)
    assert len(told) == 3
    with Runtime(SPECS, model=model(0.01), store=SQLiteStore(db)) as rt:
        report = rt.restore_report
        assert [*report.resumed, *report.requeued] == [admitted]
        assert [r.run_id for r in rt.runs()] == [admitted]
        for run_id in told:
            assert rt.get(run_id) is None
            assert list(rt.store.events(run_id)) == []
        outcome = rt.attach(admitted).result(timeout=60)
        assert (outcome.status, outcome.result) == (RunStatus.COMPLETED, "done a")
