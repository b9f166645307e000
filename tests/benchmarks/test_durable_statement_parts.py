"""``benchmarks/durable_statement_parts.py``: each variant's loop runs (natively, with
``--quick``), keeps every mail and marks read what its receipts name (the loop checks both
and fails otherwise), and the output names every variant with its log frames. Figures never
asserted (valgrind's counts are not run here)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import msgspec

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
VARIANTS = {
    "bare",
    "store",
    "no_receipt",
    "no_start_check",
    "no_journal",
    "bare_no_sender_index",
    "store_no_sender_index",
    "store_receipt_index",
}


def test_every_variant_runs_and_the_output_names_it(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "durable_statement_parts.py"), "--quick"],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = msgspec.json.decode(done.stdout)
    assert out["benchmark"] == "durable_statement_parts" and out["counted"] is False
    assert set(out["per_statement"]) == VARIANTS
    for variant in VARIANTS:  # (a commit writes a leaf of the table and one per index)
        assert out["per_statement"][variant]["log_frames"] > 1, variant
