"""``benchmarks/durable_record_work.py``: its loops run (natively, with ``--quick``) and it
prints one JSON object naming each. Figures never asserted (valgrind's counts are not run
here)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import msgspec

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def test_every_loop_runs_and_the_output_names_them(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "durable_record_work.py"), "--quick"],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = msgspec.json.decode(done.stdout)
    assert out["benchmark"] == "durable_record_work"
    assert set(out["per_unit"]) == {"record", "event", "line"}
    assert out["counted"] is False and out["n"] % 33 == 0
