"""Narrowed permissions survive a crash: the child of a plan-mode lead (Bash disallowed) is
killed with its runtime, taken up by a new process in which the lead's definition no longer
restricts anything and the runtime is in bypassPermissions; its ceiling, kept in its record
at its spawn, still holds: it writes nothing and runs no Bash."""

from __future__ import annotations

from pathlib import Path

from killed_and_rerun import killed_at_marker_then_rerun

JOB = Path(__file__).with_name("narrowing_crash_job.py")


def test_a_restored_child_keeps_its_requesters_limits(tmp_path: Path) -> None:
    result = killed_at_marker_then_rerun(JOB, tmp_path, "the child's first tool call")
    assert not (tmp_path / "written.txt").exists()
    assert not (tmp_path / "bash.txt").exists()
    assert result.startswith("write: Permission to use Write was denied: plan mode is read-only")
    assert "bash: tool 'Bash' is not available to child" in result
