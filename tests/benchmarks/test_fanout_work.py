"""``benchmarks/_fanout_work.py`` counts the calls per child of ``fanout.py``'s fan-out, at a
tiny size here: its shape (each role that does a child's work counted, the roles summing to
the whole, the top functions listed). Figures are never asserted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
pytestmark = pytest.mark.timeout(800)


def test_it_counts_a_fan_out_childs_calls_per_role_and_the_top_functions() -> None:
    command = [sys.executable, str(BENCHMARKS / "_fanout_work.py"), "--children", "40"]
    command += ["--top", "5"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    result = msgspec.json.decode(done.stdout)
    assert result["calls_supervisor"] > 0 and result["calls_agents"] > 0
    parts = sum(v for key, v in result.items() if key.startswith("calls_") and key != "calls_all")
    assert abs(result["calls_all"] - parts) < 0.5
    assert len(result["top"]) == 5
    assert all(
        line.split()[1] in {"supervisor", "agents", "caller", "other"} for line in result["top"]
    )
