"""Waiting for a condition no event of ours announces (a file another process writes, a
process group in /proc, rows another process takes), by polling it.

The timeout is a hang guard, not a timing: a passing wait returns as soon as its condition
holds, however loaded the machine; only a wait that would never end fails, with
``TimeoutError`` naming what was waited for.
"""

from __future__ import annotations

import time
from collections.abc import Callable

HANG_GUARD_S = 120.0
"""How long a wait may take before the test is taken to hang (far above any passing run)."""


def wait_until(
    predicate: Callable[[], object],
    what: str,
    timeout: float = HANG_GUARD_S,
    pace: float = 0.01,
) -> None:
    """Poll ``predicate`` every ``pace`` s until it is truthy; ``TimeoutError`` after
    ``timeout`` s, saying ``what`` never happened."""
    until = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() >= until:
            raise TimeoutError(f"not within {timeout:g} s: {what}")
        time.sleep(pace)
