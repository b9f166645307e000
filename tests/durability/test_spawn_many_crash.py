"""A crash right after ``Runtime.spawn_many`` returns loses none of the runs it admitted:
the one commit of the call came before its answer, and a runtime started later on the same
store takes every one of them up (running ones resumed, queued ones queued again)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from spawn_many_job import SPECS, model

from subagents import Limits, Runtime, SQLiteStore
from subagents.messages import RunStatus

JOB = Path(__file__).with_name("spawn_many_job.py")


def test_a_crash_after_spawn_many_loses_no_admitted_run(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    proc = subprocess.run([sys.executable, str(JOB), str(db)], capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    admitted: dict[str, str] = json.loads(proc.stdout.decode().strip().splitlines()[-1])
    assert sorted(admitted.values()) == ["a", "b", "c", "d"]  # the bad job only was refused
    with Runtime(
        SPECS, model=model(0.01), store=SQLiteStore(db), limits=Limits(max_concurrency=2)
    ) as rt:
        report = rt.restore_report
        assert sorted([*report.resumed, *report.requeued]) == sorted(admitted)
        assert len(report.resumed) == 2 and len(report.requeued) == 2
        assert {r.run_id for r in rt.runs()} == set(admitted)  # the refused one was never kept
        for run_id, task in admitted.items():
            outcome = rt.attach(run_id).result(timeout=20)
            assert outcome.status is RunStatus.COMPLETED
            assert outcome.result == f"done {task}"
