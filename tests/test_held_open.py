"""``held_open`` (tests/held_open.py), the helper of the tests that need a second process
holding a store open: a process that never says ``open`` fails the test naming what it said
and its stderr, at once, rather than holding the test until the run's timeout."""

from __future__ import annotations

from pathlib import Path

import pytest

from held_open import held_open

BUSY = """
import sys
print("not holding it", file=sys.stderr, flush=True)  # (before it says anything)
print("busy", flush=True)
sys.stdin.readline()  # (waits to be let go of, as a holder does)
"""


@pytest.mark.timeout(60)  # (a hang guard: without the fix it waited for ever here)
def test_a_process_that_says_something_else_than_open_fails_naming_it(tmp_path: Path) -> None:
    with pytest.raises(AssertionError) as failed, held_open(BUSY, tmp_path / "runs.sqlite3"):
        raise AssertionError("the block ran: the process was taken as holding the file")
    assert "busy" in str(failed.value) and "not holding it" in str(failed.value)
