"""``held_open``: a script in another process that holds a file open until a test's block
ends, e.g. a SQLite store connected from a second process (POSIX locks are per process:
a connection of the test's own process would not be seen by SQLite's locks).

The script prints ``open`` once it holds the file, then waits for a line on its stdin
before letting go and exiting; every wait has a timeout (a hang guard, not a timing)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

HANG_GUARD_S = 60.0


@contextmanager
def held_open(
    script: str, path: Path, *args: str, timeout: float = HANG_GUARD_S
) -> Iterator[list[str]]:
    """``script`` run as ``python -c script path *args``, holding ``path`` open while the
    block runs; then told to let go, and it must exit 0. What it printed after ``open`` is
    in the list given (filled once the block ends)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", script, str(path), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdin is not None
        said = proc.stdout.readline().strip()
        if said != "open":  # (its stderr read once it is ended: a live one never closes it)
            proc.kill()
            _out, err = proc.communicate(timeout=timeout)
            raise AssertionError(f"it said {said!r}, not 'open'; its stderr: {err}")
        told: list[str] = []
        yield told
        proc.stdin.write("\n")
        proc.stdin.flush()
        out, err = proc.communicate(timeout=timeout)
        assert proc.returncode == 0, err
        told.extend(out.splitlines())
    finally:
        if proc.returncode is None:
            proc.kill()
            proc.communicate(timeout=timeout)
