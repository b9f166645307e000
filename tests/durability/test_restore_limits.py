"""Restore respects the concurrency limit: running runs take their slots back first (three of
them for two slots: the parked lead, its worker, a root running in the lead's lent slot), queued
runs start only as far as the limit allows."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from restore_limits_job import SPECS, model

from subagents import Limits, Runtime, SQLiteStore
from subagents.messages import RunStatus

JOB = Path(__file__).with_name("restore_limits_job.py")


def test_restore_does_not_start_more_runs_than_the_limit(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    proc = subprocess.run([sys.executable, str(JOB), str(db)], capture_output=True, timeout=100)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    with Runtime(
        SPECS, model=model(0.05), store=SQLiteStore(db), limits=Limits(max_concurrency=2)
    ) as rt:
        report = rt.restore_report
        assert sorted(rt.get(r).agent for r in report.resumed) == ["lead", "other", "worker"]  # type: ignore[union-attr]
        assert [rt.get(r).agent for r in report.requeued] == ["late"]  # type: ignore[union-attr]
        assert rt.stats().in_flight <= 2
        roots = {r.agent: r.run_id for r in rt.runs() if r.parent_run_id is None}
        lead = rt.attach(roots["lead"]).result(timeout=60)
        other = rt.attach(roots["other"]).result(timeout=60)
        late = rt.attach(roots["late"]).result(timeout=60)
        assert lead.result == "lead done: worker done"
        assert other.status is RunStatus.COMPLETED
        assert late.result == "late done"
        assert rt.stats().peak <= 2
