"""The runtime's own mode survives a crash: a tree spawned by a plan-mode runtime is killed
with it and taken up by a runtime in bypassPermissions (``subagents resume
--permission-mode bypassPermissions``); the root's ceiling, kept in its record at its spawn,
holds the runtime's mode then, so neither the restored child nor the restored lead writes."""

from __future__ import annotations

from pathlib import Path

from killed_and_rerun import killed_at_marker_then_rerun

JOB = Path(__file__).with_name("runtime_mode_crash_job.py")


def test_a_restored_tree_keeps_the_mode_of_the_runtime_that_spawned_it(tmp_path: Path) -> None:
    result = killed_at_marker_then_rerun(JOB, tmp_path, "the child's first tool call")
    for name in ("written.txt", "bash.txt", "lead.txt"):
        assert not (tmp_path / name).exists(), (name, result)
    lead, child = result.split(" || child: ")
    assert lead.startswith("lead: Permission to use Bash was denied: plan mode is read-only"), lead
    assert child.startswith("write: Permission to use Write was denied: plan mode is read-only")
    assert "bash: Permission to use Bash was denied: plan mode is read-only" in child, child
