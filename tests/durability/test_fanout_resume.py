"""A fan_out call interrupted by a crash is taken up without spawning its children again."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from fanout_resume_job import SPECS, model

from subagents import Runtime, SQLiteStore

JOB = Path(__file__).with_name("fanout_resume_job.py")


def test_a_resumed_fan_out_waits_for_the_children_it_already_has(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    proc = subprocess.run([sys.executable, str(JOB), str(db)], capture_output=True, timeout=100)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    with Runtime(SPECS, model=model(0.05), store=SQLiteStore(db)) as rt:
        [lead] = rt.restore_report.orphans
        outcome = rt.attach(lead).result(timeout=60)
        assert outcome.ok, outcome.error
        assert "done A" in (outcome.result or "") and "done B" in (outcome.result or "")
        assert sorted(r.task for r in rt.runs(agent="worker")) == ["A", "B"]
