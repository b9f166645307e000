"""A job killed at a marker and run again: the shape the restored-permissions tests share.

Each job script (``*_crash_job.py``) takes the store, a workspace and an output file; it
writes ``marker`` in the workspace at the moment the test wants it killed, and on its second
run (restore) finishes the tree and writes what the runs were answered to the output file.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from polling import wait_until


def store_beside(workspace: Path) -> Path:
    """The job's store, outside its workspace: inside, the runs' commands could write it
    (the runtime refuses to start)."""
    return workspace.parent / f"{workspace.name}-runs.db"


def _start(job: Path, tmp: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    env["SUBAGENTS_LOG_LEVEL"] = "error"
    return subprocess.Popen(
        [sys.executable, str(job), str(store_beside(tmp)), str(tmp), str(tmp / "out.txt")],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def killed_at_marker_then_rerun(job: Path, tmp: Path, waiting_for: str) -> str:
    """Run ``job``, SIGKILL it once it has written ``tmp/marker`` (``waiting_for`` names that
    moment in a timeout's message), run it again to its end; what it wrote to ``out.txt``."""
    first = _start(job, tmp)
    try:

        def marked() -> bool:
            if first.poll() is not None:
                pytest.fail(f"the job ended early: {first.communicate()[1].decode()[-2000:]}")
            return (tmp / "marker").exists()

        wait_until(marked, waiting_for, 60.0)
    finally:
        first.send_signal(signal.SIGKILL)
        first.communicate()
    again = _start(job, tmp)
    _, err = again.communicate(timeout=90)
    assert again.returncode == 0, err.decode()[-3000:]
    return (tmp / "out.txt").read_text()
