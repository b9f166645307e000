"""A function agent taken up after a crash runs again from the top, but what its earlier
start did is not done twice: the child it spawned is awaited, not spawned again, and the mail
it sent is not resent."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from fn_resume_job import agents

from subagents import Runtime, SQLiteStore

JOB = Path(__file__).with_name("fn_resume_job.py")


def test_a_resumed_function_agent_does_not_redo_its_children_or_mail(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    proc = subprocess.run([sys.executable, str(JOB), str(db)], capture_output=True, timeout=100)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    specs, model = agents(0.05)
    store = SQLiteStore(db)
    with Runtime(specs, model=model, store=store) as rt:  # type: ignore[arg-type]
        [boss] = [r for r in rt.runs() if r.agent == "boss"]
        outcome = rt.attach(boss.run_id).result(timeout=60)
        assert outcome.result == "boss got: done expensive job"
        assert len(rt.runs(agent="worker")) == 1
        [helper] = rt.runs(agent="helper")
        mail = [m for m in store.mail_for(helper.run_id) if m.sender == boss.run_id]
        assert [m.content for m in mail] == ["hello once"]
