"""``benchmarks/_instructions.py`` counts instructions per unit of work under callgrind. Here,
without valgrind: each shape's workload runs (natively, tiny), and the count of a shape is the
difference of its two runs over ``n``, both with the same hash seed. Figures never asserted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
pytestmark = pytest.mark.timeout(600)


def _module() -> Any:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import _instructions
    finally:
        sys.path.remove(str(BENCHMARKS))
    return _instructions


def test_every_shapes_workload_runs_natively() -> None:
    for shape in sorted(_module().SHAPES):
        command = [sys.executable, str(BENCHMARKS / "_instructions.py"), "--child", shape]
        done = subprocess.run(
            [*command, "--n", "20"], capture_output=True, text=True, timeout=300, check=False
        )
        assert done.returncode == 0, (shape, done.stderr[-2000:])


def test_a_units_count_is_the_two_runs_difference_under_one_seed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    instructions = _module()
    seen: list[tuple[list[str], dict[str, str]]] = []

    def run(command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        seen.append((command, kwargs["env"]))
        if command[0] != "valgrind":
            return subprocess.CompletedProcess(command, 0, "", "")
        units = int(command[command.index("--n") + 1])
        refs = 1_000_000 + 300 * units  # imports and start, then 300 per unit
        return subprocess.CompletedProcess(command, 0, "", f"==1== Collected : {refs:,}\n")

    monkeypatch.setattr(instructions.subprocess, "run", run)
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    assert instructions.per_unit("pingpong", 50, 7) == 300
    # a native run first (it compiles what both counted runs read), then the two counted
    assert [command[0] == "valgrind" for command, _ in seen] == [False, True, True]
    assert [command[command.index("--n") + 1] for command, _ in seen[1:]] == ["100", "50"]
    assert all("pingpong" in command for command, _ in seen)
    assert {env["PYTHONHASHSEED"] for _, env in seen} == {"7"}
    assert not any("PYTHONDONTWRITEBYTECODE" in env for _, env in seen)


def test_a_failed_valgrind_run_is_an_error_naming_the_shape(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    instructions = _module()

    def run(command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(command, 1, "", "valgrind: not found")

    monkeypatch.setattr(instructions.subprocess, "run", run)
    with pytest.raises(RuntimeError, match="spawn"):
        instructions.per_unit("spawn", 10, 0)
