"""A run continued from another process, and killed (SIGKILL) while it runs: a process on
the same SQLite file continues a run the first one finished; the continuing process is
killed during the continued run's first model call (before any step of it was saved); a
third process (``Runtime(restore=True)``) finishes it once, from the seeded conversation."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from polling import wait_until
from subagents.messages import RunStatus
from subagents.store.sqlite import SQLiteStore

JOB = Path(__file__).with_name("continue_job.py")


def _start(tmp: Path, out: str, *args: str) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    env["SUBAGENTS_LOG_LEVEL"] = "error"
    return subprocess.Popen(
        [sys.executable, str(JOB), str(tmp / "runs.db"), str(tmp / out), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _finished(proc: subprocess.Popen[bytes]) -> None:
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err.decode()[-3000:]


def _first_run(tmp: Path) -> str:
    _finished(_start(tmp, "first.txt", "finish"))
    return (tmp / "first.txt").read_text()


def test_another_process_continues_a_finished_run(tmp_path: Path) -> None:
    first = _first_run(tmp_path)
    _finished(_start(tmp_path, "second.txt", "continue-quick", first))
    assert (tmp_path / "second.txt.outcome").read_text() == "second answer"


def test_a_continued_run_killed_before_its_first_step_is_finished_once(tmp_path: Path) -> None:
    first = _first_run(tmp_path)
    killed = _start(tmp_path, "second.txt", "continue", first)
    try:

        def admitted() -> bool:
            if killed.poll() is not None:
                pytest.fail(f"the job ended early: {killed.communicate()[1].decode()[-2000:]}")
            return (tmp_path / "second.txt").exists()

        wait_until(admitted, "the continued run admitted", 60.0)
    finally:
        killed.send_signal(signal.SIGKILL)
        killed.communicate()
    continued = (tmp_path / "second.txt").read_text()
    _finished(_start(tmp_path, "resumed.json", "resume", continued))
    resumed = json.loads((tmp_path / "resumed.json").read_text())
    assert (resumed["status"], resumed["result"]) == ("completed", "second answer")
    # one model call in the restoring process, shown the earlier conversation and the text
    (shown,) = resumed["shown"]
    assert [m["role"] for m in shown] == ["user", "assistant", "user"]
    assert shown[1]["content"][0]["text"] == "first answer"
    assert shown[2]["content"][-1]["text"] == "go on"


AGENT_FILE = """---
name: a
description: Answers.
script:
  - text: "first answer"
  - text: "second answer"
---
Answer.
"""


def test_subagents_resume_finishes_a_killed_continued_run_once(tmp_path: Path) -> None:
    first = _first_run(tmp_path)
    killed = _start(tmp_path, "second.txt", "continue", first)
    try:
        wait_until(lambda: (tmp_path / "second.txt").exists(), "the continued run admitted", 60.0)
    finally:
        killed.send_signal(signal.SIGKILL)
        killed.communicate()
    continued = (tmp_path / "second.txt").read_text()
    team = tmp_path / "team"
    team.mkdir()
    (team / "a.md").write_text(AGENT_FILE)
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    resume = [sys.executable, "-m", "subagents.cli.main", "resume", continued]
    options = ["--state", str(tmp_path / "runs.db"), "--agents", str(team), "--json"]
    done = subprocess.run([*resume, *options], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    check = SQLiteStore(tmp_path / "runs.db")
    try:
        record = check.get_run(continued)
        assert record is not None and record.outcome is not None
        assert (record.status, record.outcome.result) == (RunStatus.COMPLETED, "second answer")
        assert record.continues == first and record.steps == 1  # one step: finished once
        assert [r.run_id for r in check.list_runs() if r.continues == first] == [continued]
    finally:
        check.close()
