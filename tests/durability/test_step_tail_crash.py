"""A crash while a step's rest is held (``actors/step_tail.py``): the recovered parent takes
the children its step had and spawns the ones the crash left unrecorded, each once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from step_tail_crash_job import CHILDREN, LIMITS, agents

from subagents import Runtime, SQLiteStore
from subagents.actors.spawn_group import STEP_SPAWNS_MOST

JOB = Path(__file__).with_name("step_tail_crash_job.py")


def test_a_crash_with_a_steps_rest_held_recovers_every_child_once(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    proc = subprocess.run([sys.executable, str(JOB), str(db)], capture_output=True, timeout=200)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    # died with the first decision's children recorded, the rest held (without the hold the
    # rest is decided at once, and a crash there usually leaves all of them: not this case)
    assert int(proc.stdout.split()[-1]) == STEP_SPAWNS_MOST
    with Runtime(agents(None), store=SQLiteStore(db), limits=LIMITS) as rt:
        [parent] = rt.restore_report.orphans
        outcome = rt.attach(parent).result(timeout=120)
        assert outcome.ok, outcome.error
        assert outcome.result == str(CHILDREN)
        workers = rt.runs(agent="worker")
        assert sorted(r.task for r in workers) == sorted(f"t{i}" for i in range(CHILDREN))
