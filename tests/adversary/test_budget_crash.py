"""An outsider's attack on "a crash loses nothing: its budget's spend": a lead's worker
spends most of the lead's token budget and ends; the lead's process is killed (SIGKILL)
during its next tool call; a new process takes the lead up. The lead's last step takes its
subtree past the budget, so it must end ``budget_exceeded``, as it does without the crash:
the spend its ended worker made before the crash still counts."""

from __future__ import annotations

import sys
from pathlib import Path

import msgspec
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "durability"))  # job_kit

from job_kit import start_job

from polling import wait_until

JOB = Path(__file__).with_name("budget_crash_job.py")


def _finish(*args: object) -> None:
    proc = start_job(JOB, *args)
    _, err = proc.communicate(timeout=90)
    assert proc.returncode == 0, err.decode()[-3000:]


def test_an_ended_childs_spend_counts_against_its_parents_budget_after_a_crash(
    tmp_path: Path,
) -> None:
    measured = tmp_path / "measured.json"
    _finish(tmp_path / "measure.db", "measure", measured)
    used = msgspec.json.decode(measured.read_bytes())
    assert used["worker"] > 1000 and used["lead"] > 0, used
    budget = used["lead"] + used["worker"] - 1  # the lead's last step passes it, no other

    crashed = tmp_path / "crashed"
    crashed.mkdir()
    db, out = crashed / "runs.db", crashed / "out.json"
    first = start_job(JOB, db, "crash", out, budget)
    try:

        def looking() -> bool:
            if first.poll() is not None:
                pytest.fail(f"the job ended early: {first.communicate()[1].decode()[-2000:]}")
            return (crashed / "looking").exists()

        wait_until(looking, "the lead's look started", 60)
    finally:
        first.kill()  # SIGKILL, the worker ended, the lead mid call
        first.communicate()
    _finish(db, "crash", out, budget)
    result = msgspec.json.decode(out.read_bytes())
    assert result["status"] == "budget_exceeded", result
