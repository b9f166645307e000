"""benchmarks/mcp_hub.py runs at its ``--quick`` size and prints one JSON object of the shape
every benchmark prints. Figures are never asserted: timings belong to the benchmarks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import msgspec

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "mcp_hub.py"
KEYS = {"benchmark", "figures", "baseline", "target", "ratio", "pass", "machine"}


def test_the_mcp_benchmark_runs_quick() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick"], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = msgspec.json.decode(done.stdout)
    assert set(result) >= KEYS and result["benchmark"] == "mcp_hub"
    figures = result["figures"]
    for key in ("sdk_call_p50_ms", "hub_call_p50_ms", "hub_cold_start_s", "runtime_call_ms"):
        assert isinstance(figures[key], float) and figures[key] > 0, key
