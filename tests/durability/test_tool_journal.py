"""The tool journal across a real crash: SIGKILL during a Bash call, and right after a user
tool's side effect, then a new process takes the run up. The command and the tool did not
run twice, and the model was told the call was interrupted. A read-only tool runs again."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from ns_pids import pid_in
from polling import wait_until

JOB = Path(__file__).with_name("tool_crash_job.py")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    env["SUBAGENTS_LOG_LEVEL"] = "error"
    return env


def _start(tmp: Path, mode: str) -> subprocess.Popen[bytes]:
    # the store beside the job's workspace: inside, the runs' commands could write it
    return subprocess.Popen(
        [
            sys.executable,
            str(JOB),
            str(tmp.parent / f"{tmp.name}-runs.db"),
            str(tmp),
            mode,
            str(tmp / "out.json"),
        ],
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _wait_for(path: Path, proc: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    """Until ``path`` has content (written by the job's tool), or the job died."""

    def written() -> bool:
        if proc.poll() is not None:
            _, err = proc.communicate()
            pytest.fail(f"the job ended early: {err.decode()[-2000:]}")
        return path.exists() and path.read_text().strip() != ""

    wait_until(written, f"{path.name} written", timeout)


def _crash_then_resume(tmp: Path, mode: str, mark: str) -> dict[str, object]:
    proc = _start(tmp, mode)
    try:
        _wait_for(tmp / mark, proc)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
    if mode == "bash":  # the killed process's command outlives it (its own process group)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid_in(tmp / "pid"), signal.SIGKILL)
    again = _start(tmp, mode)
    _, err = again.communicate(timeout=90)
    assert again.returncode == 0, err.decode()[-3000:]
    result: dict[str, object] = msgspec.json.decode((tmp / "out.json").read_bytes())
    return result


def test_a_bash_call_killed_mid_way_is_not_run_again(tmp_path: Path) -> None:
    result = _crash_then_resume(tmp_path, "bash", "pid")
    assert (tmp_path / "bash.log").read_text() == "ran\n"  # once
    assert result["status"] == "completed"
    assert result["is_error"] is True
    assert isinstance(result["result"], str)
    assert result["result"].startswith("after: This Bash call was interrupted")


def test_a_user_tool_killed_after_its_side_effect_is_not_run_again(tmp_path: Path) -> None:
    result = _crash_then_resume(tmp_path, "effect", "marker")
    assert (tmp_path / "effects.log").read_text() == "once\n"  # once
    assert result["status"] == "completed"
    assert result["is_error"] is True
    assert isinstance(result["result"], str)
    assert "This side_effect call was interrupted" in result["result"]


def test_a_read_only_tool_interrupted_by_a_crash_runs_again(tmp_path: Path) -> None:
    result = _crash_then_resume(tmp_path, "readonly", "marker")
    assert (tmp_path / "effects.log").read_text() == "once\nonce\n"  # it ran again
    assert result == {"status": "completed", "result": "after: wrote once", "is_error": False}
