"""``benchmarks/_waiting_calls.py`` counts calls per waiting run of both start paths, at tiny
sizes here: its shape, that each path's rounds are its own processes' figures, and that its
ratio is "ours / theirs" of the medians it prints. Figures are never asserted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
pytestmark = pytest.mark.timeout(800)


@pytest.mark.parametrize("limits", ["raised", "default"])
def test_it_counts_both_paths_per_role_and_their_ratio(limits: str) -> None:
    command = [sys.executable, str(BENCHMARKS / "_waiting_calls.py"), "--quick", "--n", "30"]
    command += ["--rounds", "2", "--batch", "7"]
    if limits == "default":
        command.append("--default-limits")
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    result = msgspec.json.decode(done.stdout)
    assert result["benchmark"] == "waiting-calls"
    assert (result["n"], result["batch"]) == (30, 7)
    assert result["limits"] == ("default" if limits == "default" else "raised to n")
    for path in ("many", "one"):
        rounds = result["rounds"][path]
        assert len(rounds) == 2
        for counted in rounds:  # the roles that do a run's work, and their sum
            assert counted["supervisor"] > 0 and counted["agents"] > 0 and counted["caller"] > 0
            parts = sum(v for role, v in counted.items() if role != "all")
            assert abs(counted["all"] - parts) < 0.5
    median = result["median"]
    assert result["many_over_one"] == round(median["many"]["all"] / median["one"]["all"], 4)
