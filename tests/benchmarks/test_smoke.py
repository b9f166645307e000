"""Every benchmark script runs at its ``--quick`` size and prints one JSON object of the agreed
shape. Figures are never asserted: timings belong to the benchmarks, not to the test suite."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
NAMES = ("mail", "spawn", "fanout", "scale", "deadlines", "peer", "tools", "cli_startup")
COMMON_KEYS = {"benchmark", "figures", "baseline", "target", "ratio", "pass", "machine"}


@pytest.fixture(scope="module")
def results() -> dict[str, tuple[int, str, str]]:
    """Run all the quick benchmarks at once (each in its own interpreter), keep their output."""
    procs = {
        name: subprocess.Popen(
            [sys.executable, str(BENCHMARKS / f"{name}.py"), "--quick"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in NAMES
    }
    out: dict[str, tuple[int, str, str]] = {}
    for name, proc in procs.items():
        try:
            stdout, stderr = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, stderr = proc.communicate()
            stderr += "\n(killed after 60 s)"
        out[name] = (proc.returncode, stdout, stderr)
    return out


def _decoded(results: dict[str, tuple[int, str, str]], name: str) -> dict[str, Any]:
    code, stdout, stderr = results[name]
    assert code == 0, f"{name}.py --quick failed ({code}):\n{stderr[-2000:]}"
    decoded = msgspec.json.decode(stdout)
    assert isinstance(decoded, dict), f"{name}.py printed {type(decoded).__name__}, not an object"
    return decoded


@pytest.mark.parametrize("name", NAMES)
def test_prints_one_json_object_with_the_common_keys(
    results: dict[str, tuple[int, str, str]], name: str
) -> None:
    result = _decoded(results, name)
    assert result["benchmark"] == name
    assert result.keys() >= COMMON_KEYS, f"missing: {COMMON_KEYS - result.keys()}"
    machine = result["machine"]
    assert machine["cores"] >= 1
    assert machine["python"].count(".") == 2
    assert machine["pykka"] is not None
    assert result["pass"] in (True, False, None)


def test_mail_compares_both_stores_with_raw_pykka(results: dict[str, tuple[int, str, str]]) -> None:
    figures = _decoded(results, "mail")["figures"]
    for shape in ("stream", "pingpong"):
        assert figures[shape]["raw_msgs_per_s"] > 0
        for kind, target in (("sqlite", 0.25), ("memory", 0.5)):
            entry = figures[shape][kind]
            assert entry["msgs_per_s"] > 0
            assert entry["target"] == target
            assert entry["pass"] == (entry["ratio"] >= target)


def test_spawn_reports_latency_percentiles_and_rate(
    results: dict[str, tuple[int, str, str]],
) -> None:
    figures = _decoded(results, "spawn")["figures"]
    for kind in ("raw", "memory", "sqlite"):
        assert 0 < figures[kind]["p50_ms"] <= figures[kind]["p99_ms"]
        assert figures[kind]["runs_per_s"] > 0
    assert figures["memory"]["pass"] == (figures["memory"]["ratio_p50"] <= 2.0)


def test_fanout_makespan_is_at_least_the_ideal(results: dict[str, tuple[int, str, str]]) -> None:
    result = _decoded(results, "fanout")
    figures = result["figures"]
    assert figures["makespan_s"] >= figures["ideal_s"]
    assert result["ratio"] >= 1.0
    assert result["pass"] == (result["ratio"] <= 1.1)


def test_scale_reports_memory_per_subagent(results: dict[str, tuple[int, str, str]]) -> None:
    result = _decoded(results, "scale")
    assert result["figures"]["raw_kib_per_actor"] > 0
    assert result["figures"]["runtime_kib_per_subagent"] > 0
    assert result["sizes"]["measured"] <= result["sizes"]["requested"]
    assert "threads_max" in result["sizes"]["thread_limits"]


def test_deadlines_never_fire_early(results: dict[str, tuple[int, str, str]]) -> None:
    figures = _decoded(results, "deadlines")["figures"]
    assert figures["early"] == 0
    assert 0 <= figures["lateness_p50_ms"] <= figures["lateness_p99_ms"]
    stop = figures["stop_tree_100"]
    assert 0 < stop["answered_ms"] <= stop["threads_ended_ms"]


def test_peer_says_whether_autogen_was_measured(results: dict[str, tuple[int, str, str]]) -> None:
    result = _decoded(results, "peer")
    if result["available"]:
        assert set(result["figures"]) == {"autogen", "subagents"}
        assert result["figures"]["autogen"]["pingpong_msgs_per_s"] > 0
    else:
        assert "autogen-core" in result["reason"]


def test_tools_compares_grep_with_the_rg_command_line(
    results: dict[str, tuple[int, str, str]],
) -> None:
    r = _decoded(results, "tools")
    figures = r["figures"]
    assert set(figures["grep"]) == {"files_with_matches", "content"}
    for grep in figures["grep"].values():
        assert grep["rg_cli_ms"] > 0 and grep["grep_tool_ms"] > 0
    assert figures["read"]["file_bytes"] >= 1_000_000
    assert figures["overhead"]["tool_path_us"] >= figures["overhead"]["direct_us"]
    assert "journal_round_trip_us" in figures["journal"]
