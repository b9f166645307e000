"""Exact replay: a function agent SIGKILLed after receiving mail and stopping a child (and at
random moments, sometimes twice) resumes to the same result as a run never killed, with
nothing done twice: one child per spawn, one mail per send, the stop not issued again, the
mail it had received handed to it again, and its typed value intact through the store."""

from __future__ import annotations

import os
import random
import signal
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import msgspec
import pytest
from job_kit import start_job

from subagents.messages import RunStatus
from subagents.store.sqlite import SQLiteStore

JOB = Path(__file__).with_name("fn_replay_job.py")
TRIALS = int(os.environ.get("SUBAGENTS_REPLAY_TRIALS", "4"))


def _start(db: Path, out: Path, *hold: str) -> subprocess.Popen[str]:
    return start_job(JOB, db, out, *hold, text=True)


def _finish(db: Path, out: Path) -> dict[str, Any]:
    proc = _start(db, out)
    _, err = proc.communicate(timeout=90)
    assert proc.returncode == 0, err[-3000:]
    result: dict[str, Any] = msgspec.json.decode(out.read_bytes())
    return result


def _kill_after(proc: subprocess.Popen[str], lines: set[str]) -> list[str]:
    """Read the job's event lines until all of ``lines`` came, then SIGKILL it; the lines
    read. (All of them, not the last expected: the pinger's completion and the boss's steps
    after the pinger's mail race each other.)"""
    assert proc.stdout is not None
    seen: list[str] = []
    for raw in proc.stdout:
        seen.append(raw.strip())
        if lines <= set(seen):
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=120)
            return seen
    raise AssertionError(f"the job ended without {lines - set(seen)}: {seen}")


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The outcome of the job when nothing kills it."""
    folder = tmp_path_factory.mktemp("reference")
    result = _finish(folder / "runs.db", folder / "out.json")
    assert result["status"] == "completed", result
    assert result["value"] == {
        "mail": "token-7",
        "stopped": 1,
        "workers": [{"slept": 0.3}, {"slept": 0.4}],
        "notices": ["result]", "result]"],
    }
    return result


def _check_store(db: Path) -> None:
    """Nothing was done twice, and every run ended as an uninterrupted job's do."""
    store = SQLiteStore(db)
    try:
        runs = store.list_runs()
        by_agent = Counter(r.agent for r in runs)
        assert by_agent == Counter({"boss": 1, "pinger": 1, "sleeper": 1, "worker": 2}), runs
        status = {r.agent: r.status for r in runs}
        assert status["sleeper"] is RunStatus.CANCELLED
        assert all(r.status is RunStatus.COMPLETED for r in runs if r.agent != "sleeper"), [
            (r.agent, r.status, r.outcome) for r in runs
        ]
        spawned = Counter((r.parent_run_id, r.request_id) for r in runs if r.parent_run_id)
        assert set(spawned.values()) == {1}, spawned
        (boss,) = [r for r in runs if r.agent == "boss"]
        (pinger,) = [r for r in runs if r.agent == "pinger"]
        sent = [m for m in store.mail_for(boss.run_id) if m.sender == pinger.run_id]
        assert [m.content for m in sent if m.request_id is not None] == ["token-7"]
    finally:
        store.close()


def test_killed_after_receiving_mail_and_stopping_a_child_it_resumes_to_the_same_result(
    tmp_path: Path, reference: dict[str, Any]
) -> None:
    db, out = tmp_path / "runs.db", tmp_path / "out.json"
    proc = _start(db, out, "hold-workers")  # it cannot finish before the SIGKILL lands
    # after the receive, the stop and the sleep (a worker starts only then)
    _kill_after(proc, {"completed pinger", "cancelled sleeper", "started worker"})
    assert not out.exists()
    result = _finish(db, out)
    assert result == reference
    assert result["typed"] is True
    _check_store(db)


@pytest.mark.parametrize("seed", range(TRIALS))
def test_killed_at_random_moments_it_resumes_to_the_same_result(
    seed: int, tmp_path: Path, reference: dict[str, Any]
) -> None:
    rng = random.Random(seed)
    db, out = tmp_path / "runs.db", tmp_path / "out.json"
    for _ in range(1 + seed % 2):
        proc = _start(db, out)
        assert proc.stdout is not None
        # the runtime is up, the job on
        assert "ready\n" in iter(proc.stdout.readline, ""), proc.communicate()[1][-3000:]
        try:
            proc.wait(timeout=rng.uniform(0.0, 0.8))  # the job may also end before the kill
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=120)
        else:
            assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
    assert _finish(db, out) == reference, f"seed {seed}"
    _check_store(db)
