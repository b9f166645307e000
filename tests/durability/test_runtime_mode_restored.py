"""The runtime's own mode survives a crash: a tree spawned by a plan-mode runtime is killed
with it and taken up by a runtime in bypassPermissions (``subagents resume
--permission-mode bypassPermissions``); the root's ceiling, kept in its record at its spawn,
holds the runtime's mode then, so neither the restored child nor the restored lead writes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from polling import wait_until

JOB = Path(__file__).with_name("runtime_mode_crash_job.py")


def _start(tmp: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    env["SUBAGENTS_LOG_LEVEL"] = "error"
    return subprocess.Popen(
        [sys.executable, str(JOB), str(tmp / "runs.db"), str(tmp), str(tmp / "out.txt")],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def test_a_restored_tree_keeps_the_mode_of_the_runtime_that_spawned_it(tmp_path: Path) -> None:
    first = _start(tmp_path)
    try:

        def marked() -> bool:
            if first.poll() is not None:
                pytest.fail(f"the job ended early: {first.communicate()[1].decode()[-2000:]}")
            return (tmp_path / "marker").exists()

        wait_until(marked, "the child's first tool call", 60.0)
    finally:
        first.send_signal(signal.SIGKILL)
        first.communicate()
    again = _start(tmp_path)
    _, err = again.communicate(timeout=90)
    assert again.returncode == 0, err.decode()[-3000:]
    result = (tmp_path / "out.txt").read_text()
    for name in ("written.txt", "bash.txt", "lead.txt"):
        assert not (tmp_path / name).exists(), (name, result)
    lead, child = result.split(" || child: ")
    assert lead.startswith("lead: Permission to use Bash was denied: plan mode is read-only"), lead
    assert child.startswith("write: Permission to use Write was denied: plan mode is read-only")
    assert "bash: Permission to use Bash was denied: plan mode is read-only" in child, child
