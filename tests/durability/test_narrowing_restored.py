"""Narrowed permissions survive a crash: the child of a plan-mode lead (Bash disallowed) is
killed with its runtime, taken up by a new process in which the lead's definition no longer
restricts anything and the runtime is in bypassPermissions; its ceiling, kept in its record
at its spawn, still holds: it writes nothing and runs no Bash."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from polling import wait_until

JOB = Path(__file__).with_name("narrowing_crash_job.py")


def _start(tmp: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    env["SUBAGENTS_LOG_LEVEL"] = "error"
    return subprocess.Popen(
        [sys.executable, str(JOB), str(tmp / "runs.db"), str(tmp), str(tmp / "out.txt")],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def test_a_restored_child_keeps_its_requesters_limits(tmp_path: Path) -> None:
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
    assert not (tmp_path / "written.txt").exists()
    assert not (tmp_path / "bash.txt").exists()
    assert result.startswith("write: Permission to use Write was denied: plan mode is read-only")
    assert "bash: tool 'Bash' is not available to child" in result
