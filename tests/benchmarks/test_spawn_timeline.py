"""``benchmarks/_spawn_timeline.py`` marks every stage of a trivial run where it says, ours and
least_run's: a wrapper left on a method the runtime no longer calls (renamed, or a path moved)
would drop its stage, and the timeline would read one stage as two's time. Figures are never
asserted here (the diagnostic's medians are the machine's)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
TIMEOUT_S = 300  # a hang guard for a loaded machine, not a timing
pytestmark = pytest.mark.timeout(800)

PATH = ("c.start", "c.told", "s.wake1", "s.decided", "s.put", "a.wake", "a.report", "s.wake2")
"""The stages every trivial run passes, in this order, before its end reaches the caller."""
END = ("s.decided2", "s.land", "c.woke", "c.done")


def _timeline(*args: str) -> subprocess.CompletedProcess[str]:
    script = str(BENCHMARKS / "_spawn_timeline.py")
    return subprocess.run(
        [sys.executable, script, "--quick", *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )


def test_each_contender_is_marked_at_every_stage_in_the_order_a_run_takes_them() -> None:
    done = _timeline("--detail", "--spin", "start:after:1")
    assert done.returncode == 0, done.stderr[-2000:]
    report = msgspec.json.decode(done.stdout)
    assert report["spin"] == "start:after:1" and report["detail"] is True
    for name in ("least_run", "ours"):
        line = report["timelines"][name]
        order = list(line["at_us"])  # (the order most runs took, times since c.start)
        wanted = [*PATH, *END]
        assert [m for m in order if m in wanted] == wanted, (name, order)
        assert order[0] == "c.start" and order[-1] == "c.done"
        assert len(line["step_us"]) == len(order) - 1
    ours = list(report["timelines"]["ours"]["at_us"])
    caller = ["c.checked", "c.window", "c.waiter", "c.stamped", "c.tell", "c.told"]
    assert [m for m in ours if m in caller] == caller  # the caller's steps, before its tell
    assert ours.index("s.decided") < ours.index("s.wrote") < ours.index("s.put")
    assert ours.index("s.decided2") < ours.index("s.wrote2") < ours.index("s.land")
    assert ours.index("a.report") < ours.index("a.out")


@pytest.mark.parametrize("spin", ["nowhere:after:3", "start:during:3", "land:after:x", "land:3"])
def test_a_bad_spin_is_refused_naming_it(spin: str) -> None:
    done = _timeline("--spin", spin)
    assert done.returncode == 2
    assert "--spin" in done.stderr and done.stdout == ""
