"""Leaving plan mode survives a crash: a planner whose plan was approved is killed with its
runtime and taken up by a new process whose handler approves no plan. The approval's answer,
kept in the run's checkpoint, is found again (``plan_exit.approved_in``): the restored run is
out of plan mode without being asked again, its permissions and its sandbox both, so its Write
and its Bash write work."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from polling import wait_until
from subagents.tools.sandbox_exec import kernel_abi

JOB = Path(__file__).with_name("plan_exit_crash_job.py")


def _start(tmp: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    env["SUBAGENTS_LOG_LEVEL"] = "error"
    return subprocess.Popen(
        [sys.executable, str(JOB), str(tmp / "runs.db"), str(tmp), str(tmp / "out.txt")],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


@pytest.mark.skipif(kernel_abi() < 4, reason="the kernel offers no Landlock ABI 4+")
def test_a_restored_run_stays_out_of_the_plan_mode_it_left(tmp_path: Path) -> None:
    first = _start(tmp_path)
    try:

        def marked() -> bool:
            if first.poll() is not None:
                pytest.fail(f"the job ended early: {first.communicate()[1].decode()[-2000:]}")
            return (tmp_path / "marker").exists()

        wait_until(marked, "the planner's tool call after its plan", 60.0)
    finally:
        first.send_signal(signal.SIGKILL)
        first.communicate()
    again = _start(tmp_path)
    _, err = again.communicate(timeout=90)
    assert again.returncode == 0, err.decode()[-3000:]
    result = (tmp_path / "out.txt").read_text()
    assert result.startswith("write: File created successfully"), result
    assert (tmp_path / "written.txt").read_text() == "x"
    assert (tmp_path / "bash.txt").read_text() == "ran\n", result
