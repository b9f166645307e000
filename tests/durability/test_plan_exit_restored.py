"""Leaving plan mode survives a crash: a planner whose plan was approved is killed with its
runtime and taken up by a new process whose handler approves no plan. The approval's answer,
kept in the run's checkpoint, is found again (``plan_exit.approved_in``): the restored run is
out of plan mode without being asked again, its permissions and its sandbox both, so its Write
and its Bash write work."""

from __future__ import annotations

from pathlib import Path

import pytest
from killed_and_rerun import killed_at_marker_then_rerun

from subagents.tools.sandbox_exec import kernel_abi

JOB = Path(__file__).with_name("plan_exit_crash_job.py")


@pytest.mark.skipif(kernel_abi() < 4, reason="the kernel offers no Landlock ABI 4+")
def test_a_restored_run_stays_out_of_the_plan_mode_it_left(tmp_path: Path) -> None:
    result = killed_at_marker_then_rerun(JOB, tmp_path, "the planner's tool call after its plan")
    assert result.startswith("write: File created successfully"), result
    assert (tmp_path / "written.txt").read_text() == "x"
    assert (tmp_path / "bash.txt").read_text() == "ran\n", result
