"""Subscriptions survive a crash: a model subscribes to a topic (its ``subscribe`` call is
in its checkpoint, so the resumed run does not make it again), the process hosting it is
killed (SIGKILL); a second process (``Runtime(restore=True)``) holds the subscription from
the store, and mail sent to the topic then reaches the resumed subscriber."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from polling import wait_until
from subagents.store.sqlite import SQLiteStore

JOB = Path(__file__).with_name("topics_job.py")


def _start(tmp: Path, mode: str) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    env["SUBAGENTS_LOG_LEVEL"] = "error"
    return subprocess.Popen(
        [sys.executable, str(JOB), str(tmp / "runs.db"), str(tmp / "hub.txt"), mode],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def test_a_subscription_survives_a_crash_and_the_resume(tmp_path: Path) -> None:
    killed = _start(tmp_path, "start")
    try:

        def subscribed() -> bool:
            if killed.poll() is not None:
                pytest.fail(f"the job ended early: {killed.communicate()[1].decode()[-2000:]}")
            return (tmp_path / "hub.txt").exists()

        wait_until(subscribed, "the listener subscribed and the hub told", 60.0)
    finally:
        killed.send_signal(signal.SIGKILL)
        killed.communicate()
    store = SQLiteStore(tmp_path / "runs.db")
    try:
        (kept,) = store.subscriptions()
        assert kept.topic == "news"
    finally:
        store.close()
    # `subagents info` shows what the orphaned listener is subscribed to
    state = ["--state", str(tmp_path / "runs.db")]
    info = subprocess.run(
        [sys.executable, "-m", "subagents.cli.main", "info", kept.run_id, "--json", *state],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert info.returncode == 0, info.stderr
    assert json.loads(info.stdout)["topics"] == ["news"]
    resumed = _start(tmp_path, "resume")
    _, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, err.decode()[-3000:]
    outcome = json.loads((tmp_path / "hub.txt.outcome").read_text())
    assert outcome["status"] == "completed"
    assert '"result":"listener heard: hello"' in outcome["result"]
    store = SQLiteStore(tmp_path / "runs.db")
    try:
        assert store.subscriptions() == []  # the listener ended: its subscription with it
    finally:
        store.close()
