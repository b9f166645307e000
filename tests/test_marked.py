"""``marked`` (tests/marked.py) finds a process by the mark in its command line at every
moment of its life, inside its ``exec`` too."""

from __future__ import annotations

import shutil
import subprocess

from marked import marked, new_mark

STARTS = 100
"""Starts looked at: on a loaded machine most are found inside their ``exec``, on a quiet
one some (each start is a chance; one missed is a failure)."""


def test_a_process_is_found_by_its_mark_as_soon_as_it_is_started() -> None:
    """``Popen`` returns at its child's ``exec``'s point of no return (its close-on-exec
    pipe closes there), before the kernel has set up the new program's arguments: its
    command line reads empty until then. A test that looked for a shell right after the
    call that started it answered did not find it (session 30)."""
    sleep = shutil.which("sleep")
    assert sleep is not None
    for _ in range(STARTS):
        mark = new_mark()
        started = subprocess.Popen(["sleep", mark], executable=sleep, stdin=subprocess.DEVNULL)
        try:
            assert marked(mark, exactly=True) == [started.pid]
        finally:
            started.kill()
            started.wait()
        assert marked(mark) == []  # (reaped: gone)
