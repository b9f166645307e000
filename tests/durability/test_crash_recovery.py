"""Crash tests: a job killed with SIGKILL at random points, then taken up again.

Each trial starts ``crash_job.py`` (a five-agent job with a fan-out, a grandchild and a mail
exchange, on the offline model, with a SQLite store, or a PostgreSQL one: half as many
trials, on the session's throwaway server), kills it with SIGKILL at a seeded
random moment (sometimes twice), then starts it again until it finishes. Afterwards the
store must show: every run with exactly one terminal status and one terminal event, no
child spawned twice for one tool call, no mail sent twice or lost, no completed run started
again, and the same final result as a run never killed.

``SUBAGENTS_CRASH_TRIALS`` sets the number of trials (default 10).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import msgspec
import pytest

from subagents.messages import EventKind, MailState, RunStatus
from subagents.store.locations import store_location
from subagents.store.opening import open_location

JOB = Path(__file__).with_name("crash_job.py")
TRIALS = int(os.environ.get("SUBAGENTS_CRASH_TRIALS", "10"))
TERMINAL_EVENTS = {
    EventKind.COMPLETED,
    EventKind.FAILED,
    EventKind.CANCELLED,
    EventKind.TIMED_OUT,
    EventKind.BUDGET_EXCEEDED,
}


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    env["SUBAGENTS_LOG_LEVEL"] = "error"
    return env


def _start(db: str, out: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, str(JOB), db, str(out)],
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _finish(db: str, out: Path) -> dict[str, str]:
    proc = _start(db, out)
    _, err = proc.communicate(timeout=90)
    assert proc.returncode == 0, err.decode()[-3000:]
    result: dict[str, str] = msgspec.json.decode(out.read_bytes())
    return result


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The outcome of the job when nothing kills it."""
    folder = tmp_path_factory.mktemp("reference")
    result = _finish(str(folder / "runs.db"), folder / "out.json")
    assert result["status"] == "completed"
    return result


def _states(db: str) -> str:
    """How far the job was when it was killed (for the failure message)."""
    store = open_location(store_location(db))
    try:
        return ",".join(f"{r.agent}:{r.status}" for r in store.list_runs())
    finally:
        store.close()


def _check_store(db: str) -> None:
    store = open_location(store_location(db))
    try:
        runs = store.list_runs()
        assert len(runs) == 5, [(r.agent, r.status) for r in runs]
        for run in runs:
            assert run.status is RunStatus.COMPLETED, (run.agent, run.status, run.outcome)
            events = store.events(run.run_id)
            kinds = [e.kind for e in events]
            terminal = [k for k in kinds if k in TERMINAL_EVENTS]
            assert terminal == [EventKind.COMPLETED], (run.agent, kinds)
            # nothing happens to a run after it completed: it is never started again
            assert kinds[-1] is EventKind.COMPLETED or all(
                k not in (EventKind.STARTED, EventKind.STEP)
                for k in kinds[kinds.index(EventKind.COMPLETED) :]
            ), (run.agent, kinds)
        # one child per tool call that asked for it
        spawned = Counter((r.parent_run_id, r.request_id) for r in runs if r.parent_run_id)
        assert all(n == 1 for n in spawned.values()), spawned
        assert Counter(r.agent for r in runs) == Counter(
            ["lead", "researcher", "fact-checker", "critic", "writer"]
        )
        # mail: exactly the two messages, each sent once and read, none dead
        mail = {m.mail_id: m for r in runs for m in store.mail_for(r.run_id)}
        sent = Counter((m.sender, m.request_id) for m in mail.values())
        assert len(mail) == 2, list(mail.values())
        assert all(n == 1 for n in sent.values()), sent
        assert {m.state for m in mail.values()} == {MailState.READ}
    finally:
        store.close()


@pytest.mark.parametrize(
    ("kind", "seed"),
    [*(("sqlite", n) for n in range(TRIALS)), *(("postgres", n) for n in range(TRIALS // 2))],
)
def test_killed_job_resumes_to_the_same_result(
    kind: str, seed: int, tmp_path: Path, reference: dict[str, str], request: pytest.FixtureRequest
) -> None:
    rng = random.Random(seed)
    out = tmp_path / "out.json"
    db = request.getfixturevalue("pg_url") if kind == "postgres" else str(tmp_path / "runs.db")
    kills = 1 + (seed % 3 == 2)
    killed = 0
    states: list[str] = []
    for _ in range(kills):
        proc = _start(db, out)
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"ready\n"  # the runtime is up and the job running
        try:
            proc.wait(timeout=rng.uniform(0.0, 0.9))  # the job may also end before the kill
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
            killed += 1
            states.append(_states(db))
        else:
            assert proc.returncode == 0, proc.stderr.read().decode() if proc.stderr else ""
    result = _finish(db, out)
    assert result == reference, f"seed {seed} (killed {killed} times at {states})"
    _check_store(db)
