"""An outsider's attack on the tool journal: SIGKILL of the process running an agent in the
middle of a turn of three side-effecting calls (an Edit done, a Bash command running, a Bash
command after it), then a new process on the same SQLite file takes the run up. The promise
(docs/tools.md, "The tool journal"): each call is known done (not run again, its result
used), known not started (run), or told to the model as interrupted; none runs twice."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import msgspec
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "durability"))  # job_kit

from job_kit import start_job

from ns_pids import GONE, pid_in
from polling import wait_until

JOB = Path(__file__).with_name("turn_crash_job.py")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_turn_cut_mid_way_runs_no_call_twice(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("a")
    db, out = tmp_path / "runs.db", tmp_path / "out.json"
    first = start_job(JOB, db, work, out)
    try:

        def started() -> bool:
            if first.poll() is not None:
                pytest.fail(f"the job ended early: {first.communicate()[1].decode()[-2000:]}")
            return (work / "pid").exists() and (work / "pid").read_text().strip() != ""

        wait_until(started, "the slow command started", 60)
        command = pid_in(work / "pid")
        assert command > 0
    finally:
        first.kill()  # SIGKILL, mid turn
        first.communicate()
    # the launcher kills the dead runtime's command (docs/tools.md, Bash)
    wait_until(lambda: command == GONE or not _alive(command), "the command killed", 60)
    again = start_job(JOB, db, work, out)
    _, err = again.communicate(timeout=90)
    assert again.returncode == 0, err.decode()[-3000:]
    result = msgspec.json.decode(out.read_bytes())
    assert result["status"] == "completed", result
    assert (work / "a.txt").read_text() == "ab"  # the Edit, once
    assert (work / "bash.log").read_text() == "ran\n"  # the slow command, once
    assert (work / "third.log").read_text() == "third\n"  # the call after it, once
    said: str = result["result"]
    edit, rest = said.split("\nslow: ", 1)
    slow, third = rest.split("\nthird: ", 1)
    assert edit.startswith("edit: The file") and "has been updated" in edit, edit  # known done
    assert slow.startswith("This Bash call was interrupted"), slow  # told, not run again
    assert third == "(no output)", third  # never started: run, once
