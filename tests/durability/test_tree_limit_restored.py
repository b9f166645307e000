"""``max_runs_per_tree`` holds across a crash: the restored tree is counted from the store's
records of it (the ended worker included), so of the resumed lead's next two spawns one fits
and the other is refused naming the limit; and the child started with the tree full is
offered no spawn tool (its offer runs the checks over the count it was started with)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from tree_limit_job import LIMITS, SPECS, model

from subagents import Runtime, SQLiteStore
from subagents.messages import RunStatus

JOB = Path(__file__).with_name("tree_limit_job.py")


def test_a_restored_tree_keeps_its_count_of_runs(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    proc = subprocess.run([sys.executable, str(JOB), str(db)], capture_output=True, timeout=100)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    scripted = model(0.01)
    with Runtime(SPECS, model=scripted, store=SQLiteStore(db), limits=LIMITS) as rt:
        report = rt.restore_report
        assert sorted(rt.get(r).agent for r in report.resumed) == ["lead", "slow"]  # type: ignore[union-attr]
        (lead,) = [r for r in rt.runs() if r.parent_run_id is None]
        outcome = rt.attach(lead.run_id).result(timeout=60)
        agents = sorted(r.agent for r in rt.runs())
    assert outcome.status is RunStatus.COMPLETED
    assert outcome.result == (
        f"lead done: extra done; max_runs_per_tree: the tree of {lead.run_id} has admitted 4"
        " runs, the limit is 4 (Limits.max_runs_per_tree; --max-runs-per-tree)"
    )
    assert agents == ["extra", "lead", "slow", "worker"]  # no "late": a fifth run
    (extra,) = [r for r in scripted.requests if r.agent == "extra"]
    assert "spawn_subagent" not in [t.name for t in extra.tools]
    resumed = [r for r in scripted.requests if r.agent == "lead"]
    assert resumed and all("spawn_subagent" in [t.name for t in r.tools] for r in resumed)
