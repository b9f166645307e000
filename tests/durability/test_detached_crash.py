"""A detached child survives a crash of the process hosting it: its parent (the root) has
completed, the process is killed (SIGKILL) while the child waits for mail; a second process
(``Runtime(restore=True)``) takes the child up though its parent has ended (an ordinary child
would be cancelled), and it ends once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from polling import wait_until
from subagents.messages import EventKind, RunStatus
from subagents.store.sqlite import SQLiteStore

JOB = Path(__file__).with_name("detached_job.py")


def _start(tmp: Path, mode: str) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    env["SUBAGENTS_LOG_LEVEL"] = "error"
    return subprocess.Popen(
        [sys.executable, str(JOB), str(tmp / "runs.db"), str(tmp / "ids.json"), mode],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def test_a_detached_child_killed_with_its_host_resumes_and_ends_once(tmp_path: Path) -> None:
    killed = _start(tmp_path, "start")
    try:

        def written() -> bool:
            if killed.poll() is not None:
                pytest.fail(f"the job ended early: {killed.communicate()[1].decode()[-2000:]}")
            return (tmp_path / "ids.json").exists()

        wait_until(written, "the detached child waiting, its parent ended", 60.0)
    finally:
        killed.send_signal(signal.SIGKILL)
        killed.communicate()
    ids = json.loads((tmp_path / "ids.json").read_text())
    resumed = _start(tmp_path, "resume")
    _, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, err.decode()[-3000:]
    outcome = json.loads((tmp_path / "ids.json.outcome").read_text())
    assert outcome == {"status": "completed", "result": "slow got: wake"}
    store = SQLiteStore(tmp_path / "runs.db")
    try:
        lead, slow = store.get_run(ids["lead"]), store.get_run(ids["slow"])
        assert lead is not None and slow is not None
        assert lead.status is RunStatus.COMPLETED  # left as it ended
        assert slow.detached and slow.parent_run_id == lead.run_id
        assert slow.status is RunStatus.COMPLETED
        ends = [e.kind for e in store.events(slow.run_id) if e.kind is EventKind.COMPLETED]
        assert ends == [EventKind.COMPLETED]  # it ended once
        starts = [e for e in store.events(slow.run_id) if e.kind is EventKind.STARTED]
        assert len(starts) == 2  # its first start, and the one after the crash
    finally:
        store.close()
