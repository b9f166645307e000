"""The look through /proc for a command's strays reads only processes started at or after
the command: a process that started before it is never read (its environment's read could
wait on a process stuck holding its memory lock), even when it carries the cookie."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from subagents.tools import processes, strays


def _alive(popen: subprocess.Popen[bytes]) -> bool:
    return popen.poll() is None


def test_a_process_older_than_the_command_is_not_read() -> None:
    cookie = f"since-test-{os.getpid()}"
    older = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(300)"],
        env={**os.environ, strays.TREE_COOKIE: cookie},
    )
    try:
        started = strays.start_time(str(older.pid))
        assert started > 0
        strays.kill_strays(cookie, started + 1)  # the command started after it
        assert _alive(older), "a process older than the command was killed"
        strays.kill_strays(cookie, started)  # started with the command: a stray
        assert older.wait(timeout=30) == -9
    finally:
        older.kill()
        older.wait()


def test_a_command_records_when_it_started(tmp_path: Path) -> None:
    groups = processes.ProcessGroups()
    try:
        process = groups.start("sleep 30", cwd=tmp_path, run_id="r")
        reaper = strays.start_time(str(process.reaper_pid))  # (its launcher's first, or it)
        assert 0 < process.since <= reaper, (process.since, reaper)
    finally:
        groups.kill_all()
