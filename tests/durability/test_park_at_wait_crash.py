"""Runs that parked at their wait by themselves (``StartRun.park_at_wait``), SIGKILLed with
the process, are taken up by the next runtime on the store within the limit, and each ends
once with the mail it is sent (supervision/parking.py)."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

from job_kit import start_job

sys.path.insert(0, str(Path(__file__).parent))
from park_at_wait_job import RUNS, idle

from subagents import Limits, Runtime, SQLiteStore
from subagents.messages import RunStatus

JOB = Path(__file__).with_name("park_at_wait_job.py")


def test_runs_parked_at_their_wait_killed_resume_within_the_limit_and_end_once(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    proc = start_job(JOB, db, text=True)
    assert proc.stdout is not None
    seen: list[str] = []
    for raw in proc.stdout:
        seen.append(raw.strip())
        if raw.startswith("ready "):
            proc.send_signal(signal.SIGKILL)
            break
    proc.wait(timeout=120)
    assert seen and seen[-1].startswith("ready "), seen
    ids = seen[-1].split()[1:]
    assert seen.count("parked idle ['at_wait']") == RUNS - 2, seen  # the 2nd and the 3rd
    with Runtime({"idle": idle}, store=SQLiteStore(db), limits=Limits(per_agent=1)) as rt:
        report = rt.restore_report
        assert sorted([*report.resumed, *report.requeued]) == sorted(ids)
        for run_id in ids:
            rt.send(run_id, "go")
        outcomes = [rt.attach(run_id).result(60) for run_id in ids]
        peak = rt.stats().peak
    assert [(o.status, o.result) for o in outcomes] == [
        (RunStatus.COMPLETED, f"{i}:go") for i in range(RUNS)
    ]
    assert peak <= 1
