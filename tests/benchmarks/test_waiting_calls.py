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


def test_a_role_missing_from_a_round_counts_zero_there() -> None:
    """A round can lack a role with no call in it ("other"); the fold reads it as 0 there
    rather than failing (a ``KeyError: 'other'`` failed the smoke test above now and then)."""
    sys.path.insert(0, str(BENCHMARKS))
    from _waiting_calls import fold_medians

    folded = fold_medians(
        [{"all": 10.0, "agents": 4.0}, {"all": 12.0, "agents": 5.0, "other": 1.0}]
    )
    assert folded == {"agents": 4.5, "all": 11.0, "other": 0.5}
