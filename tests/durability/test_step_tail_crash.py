"""A crash while a step's rest is held (``actors/step_tail.py``): the recovered parent takes
the children its step had and spawns the ones the crash left unrecorded, each once; under a
budget, those too are granted what the parent has left (they were granted none: a restored
run entered the budget ledger only at its first step, and the replay spawns before it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from step_tail_crash_job import CHILDREN, LIMITS, agents

from subagents import Runtime, SQLiteStore
from subagents.actors.spawn_group import STEP_SPAWNS_MOST

JOB = Path(__file__).with_name("step_tail_crash_job.py")


@pytest.mark.parametrize("budget", [None, 10**6])
def test_a_crash_with_a_steps_rest_held_recovers_every_child_once(
    tmp_path: Path, budget: int | None
) -> None:
    db = tmp_path / "runs.db"
    argv = [sys.executable, str(JOB), str(db), *([] if budget is None else [str(budget)])]
    proc = subprocess.run(argv, capture_output=True, timeout=200)
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
        # every child within the parent's budget, those the replay spawned too
        assert {r.token_budget for r in workers} == {budget}, sorted(
            (r.task, r.token_budget) for r in workers
        )
