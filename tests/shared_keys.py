"""Runs a scenario that reports the ``__dict__`` sizes of the objects it watched, in a fresh
interpreter: CPython 3.11 shares one keys table among a class's instances only while every
name is set in the constructor (a name first set late, once ~30 instances exist, gives every
later instance a dict of its own). Used by the attribute tests of agent actors and LLM
behaviours, whose waiting runs each hold one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any


def run_scenario(scenario: str, wait: float, first: int, timeout: float) -> dict[str, Any]:
    """``scenario`` run with ``wait`` and ``first`` as its arguments, ``tests/`` on its path;
    its last line of output, decoded."""
    tests = str(Path(__file__).resolve().parent)  # (``polling``)
    path = os.pathsep.join(p for p in (tests, os.environ.get("PYTHONPATH")) if p)
    done = subprocess.run(
        [sys.executable, "-c", scenario, str(wait), str(first)],
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    seen: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return seen


def assert_keys_shared(seen: dict[str, Any], watched: int) -> None:
    """Each of the ``watched`` objects' dict smaller than the same items in a dict of their
    own (equal once it has become one), and every run completed."""
    assert len(seen["sizes"]) == watched
    for own, combined in seen["sizes"]:
        assert own < combined, seen["keys"]
    assert seen["statuses"] == ["completed"] * watched
