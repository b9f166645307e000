"""A parked parent that took some of its children's ends without its slot, SIGKILLed, resumes
to the same result: each child ran once, and the ends it had taken while parked are handed
to its replay as they were (``FunctionBehaviour.only_records``, ``AgentActor._one``)."""

from __future__ import annotations

import signal
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import msgspec
import pytest
from job_kit import start_job

from subagents.messages import EventKind, RunStatus
from subagents.store.sqlite import SQLiteStore

JOB = Path(__file__).with_name("parked_gather_job.py")
EXPECTED = "C0,C1,C2,C3,C4"


def _start(db: Path, out: Path, *hold: str) -> subprocess.Popen[str]:
    return start_job(JOB, db, out, *hold, text=True)


def _finish(db: Path, out: Path) -> dict[str, Any]:
    proc = _start(db, out)
    _, err = proc.communicate(timeout=90)
    assert proc.returncode == 0, err[-3000:]
    result: dict[str, Any] = msgspec.json.decode(out.read_bytes())
    return result


@pytest.mark.parametrize("ends_seen", [1, 3])
def test_a_parked_parent_killed_after_taking_ends_without_its_slot_resumes_once_each(
    tmp_path: Path, ends_seen: int
) -> None:
    db, out = tmp_path / "runs.db", tmp_path / "out.json"
    proc = _start(db, out, "hold-last")  # it cannot finish before the SIGKILL lands
    assert proc.stdout is not None
    seen: list[str] = []
    for raw in proc.stdout:
        seen.append(raw.strip())
        if seen.count(f"{EventKind.COMPLETED} child") >= ends_seen:
            proc.send_signal(signal.SIGKILL)
            break
    proc.wait(timeout=120)
    assert f"{EventKind.PARKED} parent" in seen, seen  # it had lent its slot
    assert not out.exists()
    result = _finish(db, out)
    assert result == {"status": "completed", "result": EXPECTED}
    store = SQLiteStore(db)
    try:
        runs = store.list_runs()
        assert Counter(r.agent for r in runs) == Counter({"parent": 1, "child": 5}), runs
        assert all(r.status is RunStatus.COMPLETED for r in runs), [
            (r.agent, r.status) for r in runs
        ]
        assert sorted(r.task for r in runs if r.agent == "child") == [f"c{i}" for i in range(5)]
    finally:
        store.close()
