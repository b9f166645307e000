"""The tool journal with MCP tools across a real crash: the process running the agent is
killed with SIGKILL right after an MCP tool's side effect, then a new process takes the run
up. A tool the server does not mark read-only is not called again and the model is told;
one marked read-only simply runs again."""

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

JOB = Path(__file__).with_name("mcp_crash_job.py")

# four interpreters start one after the other (two jobs, two servers): on loaded shared cores
# that alone can pass the suite's 120 s hang guard
pytestmark = pytest.mark.timeout(900)


def _start(tmp: Path, tool: str) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    env["SUBAGENTS_LOG_LEVEL"] = "warning"  # a server that cannot start says why
    # the store beside the job's workspace: inside, the runs' commands could write it
    return subprocess.Popen(
        [
            sys.executable,
            str(JOB),
            str(tmp.parent / f"{tmp.name}-runs.db"),
            str(tmp),
            tool,
            str(tmp / "out.json"),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _crash_then_resume(tmp: Path, tool: str) -> dict[str, object]:
    marker = tmp / "marker"
    proc = _start(tmp, tool)
    try:

        def side_effect_done() -> bool:
            if proc.poll() is not None:
                out = tmp / "out.json"
                result = out.read_text() if out.exists() else "(no result written)"
                err = proc.communicate()[1].decode()[-2000:]
                pytest.fail(f"the job ended before the tool's side effect: {result} {err}")
            return marker.exists() and marker.read_text().strip() != ""

        wait_until(side_effect_done, "the MCP tool's side effect", timeout=600)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
    # the server was the killed process's child in its own session: it outlives it
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid_in(marker), signal.SIGKILL)  # (GONE if it ended: tests/ns_pids.py)
    marker.unlink()
    again = _start(tmp, tool)
    _, err = again.communicate(timeout=360)
    assert again.returncode == 0, err.decode()[-3000:]
    result: dict[str, object] = msgspec.json.decode((tmp / "out.json").read_bytes())
    return result


def test_an_mcp_tool_killed_after_its_side_effect_is_not_called_again(tmp_path: Path) -> None:
    result = _crash_then_resume(tmp_path, "note")
    assert (tmp_path / "effects.log").read_text() == "once\n"  # once
    assert not (tmp_path / "marker").exists()  # the resumed run never called the server
    assert result["status"] == "completed" and result["is_error"] is True
    assert isinstance(result["result"], str)
    assert result["result"].startswith("after: This mcp__calc__note call was interrupted")


def test_a_read_only_mcp_tool_simply_runs_again(tmp_path: Path) -> None:
    result = _crash_then_resume(tmp_path, "peek")
    assert (tmp_path / "effects.log").read_text() == "peek\npeek\n"  # twice: harmless
    assert result["status"] == "completed" and result["is_error"] is False
    assert result["result"] == "after: peeked"
