"""``run_all.py --processes N``: several processes of a short ratio benchmark read as one row.

Fixed inputs, no benchmark run and no timing: the row shown is one process's row whole (the
median process; of an even count the worse middle one, by the goal's direction), its ratio
cell says the median's place and the range over every process, its load cell every process's
load, a failed process is left out and said, and ``run_rounds`` keeps every process of a short
benchmark while a long one keeps its quietest round.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def run_all() -> Iterator[ModuleType]:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import run_all as module
    finally:
        sys.path.remove(str(BENCHMARKS))
    yield module


def _load(value: float) -> dict[str, Any]:
    return {"start": value, "end": value, "max": value, "loaded": value > 1.5}


def _spawn(ratio: float, load: float = 0.8, raw_ms: float = 0.1) -> dict[str, Any]:
    """A spawn.py result of the shape the row makers read, its p50 ``ratio`` times raw's."""

    def side(p50: float, pass_: bool) -> dict[str, Any]:
        return {
            "p50_ms": p50,
            "p99_ms": p50 * 2,
            "runs_per_s": 1000.0,
            "cpu_us_per_run": 100.0,
            "ratio_p50": round(p50 / raw_ms, 4),
            "ratio_p99": 2.0,
            "ratio_runs_per_s": 0.5,
            "ratio_p50_to_thread_per_actor": 0.7,
            "pass": pass_,
        }

    raw = {"p50_ms": raw_ms, "p99_ms": raw_ms * 2, "runs_per_s": 9000.0, "cpu_us_per_run": 90.0}
    return {
        "benchmark": "spawn",
        "figures": {
            "raw_pooled": raw,
            "raw_thread_per_actor": {**raw, "p50_ms": 0.3},
            "memory": side(round(ratio * raw_ms, 6), ratio <= 1.5),
            "sqlite": side(round(ratio * raw_ms * 3, 6), False),
        },
        "target": "runtime p50 latency <= 1.5x raw_pooled (MemoryStore)",
        "load": _load(load),
    }


def _goal_row(run_all: ModuleType, result: dict[str, Any], label: str) -> list[str]:
    text = run_all.tables([result])
    line = next(line for line in text.splitlines() if line.startswith(f"| {label}"))
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_the_ratio_and_the_direction_are_read_from_the_cells(run_all: ModuleType) -> None:
    import _processes

    row = ("x", "f", "a", "p50 2.2106x, p99 2.67x", ">= 0.5x", "met", "0.7")
    assert _processes.ratio_of(row) == 2.2106
    assert _processes.ratio_of((*row[:3], "-", *row[4:])) is None
    assert _processes.higher_is_better(">= 0.7x") is True
    assert _processes.higher_is_better("> 1x, in a quiet round too") is True
    assert _processes.higher_is_better("<= 1.5x") is False
    assert _processes.higher_is_better("< 1x") is False
    assert _processes.higher_is_better("CPU us/msg: ...") is None


def test_the_middle_of_an_even_count_is_the_worse_one(run_all: ModuleType) -> None:
    import _processes

    assert _processes.middle([0.9, 0.5, 0.7], True) == 2  # odd: the median, whatever the way
    assert _processes.middle([0.9, 0.5, 0.7], False) == 2
    values = [0.6, 0.9, 0.7, 0.8]  # middle ones 0.7 (index 2) and 0.8 (index 3)
    assert _processes.middle(values, True) == 2  # higher is better: the lower is the worse
    assert _processes.middle(values, False) == 3  # lower is better: the higher is the worse
    assert _processes.middle(values, None) == 2
    assert _processes.middle([0.7, 0.7], True) == 0  # ties: the first process


def test_the_row_shown_is_the_median_process_whole_with_the_range(run_all: ModuleType) -> None:
    processes = [_spawn(2.5, load=0.6), _spawn(1.4, load=0.9), _spawn(1.9, load=1.1)]
    cells = _goal_row(run_all, {"benchmark": "spawn", "processes": processes}, "trivial spawn")
    # the median process (1.9x): its figure, its anchor, its ratio and its verdict
    assert cells[1] == "0.19 ms"
    assert cells[3] == "1.9x (median of 3 processes; range 1.4x-2.5x)"
    assert cells[5] == "**missed**"  # 1.4x met in one process: the median is what counts
    assert cells[6] == "1.10 (each: 0.60, 0.90, 1.10)"
    # the anchor is the shown process's own
    processes[2] = _spawn(1.9, load=1.1, raw_ms=0.2)
    cells = _goal_row(run_all, {"benchmark": "spawn", "processes": processes}, "trivial spawn")
    assert cells[2] == "raw pykka start+ask+stop, reused thread 0.2 ms" and cells[1] == "0.38 ms"


def test_an_even_count_shows_the_worse_middle_process(run_all: ModuleType) -> None:
    processes = [_spawn(1.6), _spawn(1.2), _spawn(1.45), _spawn(2.0)]
    cells = _goal_row(run_all, {"benchmark": "spawn", "processes": processes}, "trivial spawn")
    # lower is better (<= 1.5x): of 1.45x (met) and 1.6x (missed) the table shows 1.6x
    assert cells[3].startswith("1.6x (the worse middle one of 4 processes; range 1.2x-2x)")
    assert cells[5] == "**missed**"


def test_a_failed_process_is_left_out_and_said(run_all: ModuleType) -> None:
    failed = {"benchmark": "spawn", "error": "exit status 1: boom"}
    processes = [_spawn(1.2), failed, _spawn(1.4)]
    cells = _goal_row(run_all, {"benchmark": "spawn", "processes": processes}, "trivial spawn")
    assert "the worse middle one of 2 processes" in cells[3] and cells[3].startswith("1.4x")
    assert "1 of 3 processes failed: failed: exit status 1: boom" in cells[3]
    met = [_spawn(1.2), failed, _spawn(1.4)]
    cells = _goal_row(run_all, {"benchmark": "spawn", "processes": met}, "trivial spawn")
    assert cells[5] == "met by 2 of 3 processes (the others failed)"
    every = run_all.tables([{"benchmark": "spawn", "processes": [failed, failed]}])
    assert "| spawn | failed | exit status 1: boom |" in every and "**missed**" in every


def test_a_loaded_process_marks_the_row_even_when_the_median_was_quiet(
    run_all: ModuleType,
) -> None:
    processes = [_spawn(1.9, load=0.7), _spawn(1.4, load=2.4), _spawn(2.5, load=0.8)]
    text = run_all.tables([{"benchmark": "spawn", "processes": processes}])
    line = next(line for line in text.splitlines() if line.startswith("| trivial spawn"))
    assert line.endswith("| 0.70 (some **loaded**; each: 0.70, **2.40 loaded**, 0.80) |")
    assert "4 of 4 rows were taken above load 1.5" in text
    quiet = [_spawn(1.9, load=0.7), _spawn(1.4, load=0.9), _spawn(2.5, load=0.8)]
    assert "Every row was taken at load 1.5 or below" in run_all.tables(
        [{"benchmark": "spawn", "processes": quiet}]
    )


def test_one_process_reads_as_before(run_all: ModuleType) -> None:
    alone = run_all.tables([_spawn(1.9, load=0.7)])
    folded = run_all.tables([{"benchmark": "spawn", "processes": [_spawn(1.9, load=0.7)]}])
    row = next(line for line in alone.splitlines() if line.startswith("| trivial spawn"))
    assert (
        row == "| trivial spawn -> result, p50 (in memory) | 0.19 ms | raw pykka start+ask+stop,"
        " reused thread 0.1 ms | 1.9x | <= 1.5x | **missed** | 0.70 |"
    )
    assert row in folded.splitlines()


def test_a_row_without_a_target_takes_its_benchmarks_direction(run_all: ModuleType) -> None:
    processes = [_spawn(1.6), _spawn(1.2), _spawn(1.45), _spawn(2.0)]
    text = run_all.tables([{"benchmark": "spawn", "processes": processes}])
    line = next(line for line in text.splitlines() if line.startswith("| spawn -> result (memory)"))
    # its notes state no target; spawn's goal is lower-is-better: the worse middle is 1.6x
    assert "| p50 0.16 ms, p99 0.32 ms," in line and "| p50 1.6x, p99 2.0x," in line
    assert "(the worse middle one of 4 processes; range 1.2x-2x)" in line


def test_rows_without_a_ratio_come_from_the_headlines_process(run_all: ModuleType) -> None:
    import _processes

    def rows(ratio: str, note: str) -> list[tuple[str, ...]]:
        return [
            ("goal", "f", "a", ratio, "<= 1.5x", "-", "0.5"),
            ("side", note, "a", "-", "-", "-", "0.5"),
        ]

    folded = _processes.fold([rows("1.2x", "one"), rows("3x", "two"), rows("2x", "three")], [])
    assert folded[0][3].startswith("2x (median of 3") and folded[1][1] == "three"
    assert folded[1][3] == "- (process 3 of 3, the headline's middle one)"


def test_run_rounds_keeps_every_short_process_and_the_quietest_long_round(
    run_all: ModuleType,
) -> None:
    calls: list[str] = []
    loads = iter([3.0, 1.0, 2.0, 0.9, 0.8, 1.2, 0.7, 2.5])

    def taken(name: str, quick: bool) -> dict[str, Any]:  # what each process printed, fixed
        calls.append(name)
        return {"benchmark": name, "load": _load(next(loads)), "n": len(calls)}

    results = run_all.run_rounds(["spawn", "scale"], True, 2, 0, processes=3, runner=taken)
    # the short one's passes first in each round, the long one once per round after them
    assert calls == ["spawn", "spawn", "spawn", "scale"] * 2
    spawn, scale = results
    assert [p["n"] for p in spawn["processes"]] == [1, 2, 3, 5, 6, 7]  # every one kept
    assert [(p["taken_in"]["round"], p["taken_in"]["pass"]) for p in spawn["processes"]] == [
        (1, 1),
        (1, 2),
        (1, 3),
        (2, 1),
        (2, 2),
        (2, 3),
    ]
    # loads: spawn 3.0, 1.0, 2.0, scale 0.9 | spawn 0.8, 1.2, 0.7, scale 2.5: the quieter kept
    assert scale["n"] == 4 and scale["rounds"] == {"kept": 1, "of": 2, "loads": [0.9, 2.5]}
    assert len(run_all.each_process(results)) == 7  # the six of spawn, the kept one of scale


def test_processes_1_keeps_the_quietest_round_of_a_short_benchmark_too(
    run_all: ModuleType,
) -> None:
    loads = iter([2.0, 0.9])

    def taken(name: str, quick: bool) -> dict[str, Any]:
        return {"benchmark": name, "load": _load(next(loads))}

    (spawn,) = run_all.run_rounds(["spawn"], True, 2, 0, processes=1, runner=taken)
    assert "processes" not in spawn and spawn["rounds"]["kept"] == 2


def test_a_goal_met_only_by_a_loaded_figure_is_not_read_as_met(run_all: ModuleType) -> None:
    quiet = _goal_row(run_all, _spawn(1.2, load=0.9), "trivial spawn")
    assert quiet[5] == "met"
    loud = _goal_row(run_all, _spawn(1.2, load=2.0), "trivial spawn")
    assert loud[5] == "met in a loaded round only"
    assert _goal_row(run_all, _spawn(1.9, load=2.0), "trivial spawn")[5] == "**missed**"
    # folded: one loaded process of three is enough to say so
    processes = [_spawn(1.2, load=0.9), _spawn(1.3, load=2.2), _spawn(1.1, load=0.8)]
    cells = _goal_row(run_all, {"benchmark": "spawn", "processes": processes}, "trivial spawn")
    assert cells[5] == "met in a loaded round only"


def test_a_loaded_goal_with_a_failed_process_still_says_loaded(run_all: ModuleType) -> None:
    failed = {"benchmark": "spawn", "error": "exit status 1: boom"}
    loud = [_spawn(1.2, load=2.0), failed, _spawn(1.4, load=2.2)]
    cells = _goal_row(run_all, {"benchmark": "spawn", "processes": loud}, "trivial spawn")
    # both finished processes were loaded: neither qualifier may hide the other
    assert cells[5] == "met in a loaded round only by 2 of 3 processes (the others failed)"
    quiet = [_spawn(1.2, load=0.9), failed, _spawn(1.4, load=0.8)]
    cells = _goal_row(run_all, {"benchmark": "spawn", "processes": quiet}, "trivial spawn")
    assert cells[5] == "met by 2 of 3 processes (the others failed)"
    # a verdict the row maker already qualified (mail's ahead-of-autogen rows) keeps the count
    row = ("ahead", "f", "a", "1.3x", "> 1x", "met in a loaded round only", "**2.00 loaded**")
    import _processes

    (folded,) = _processes.fold([[row], None, [row]], ["failed: boom"])
    assert folded[5] == "met in a loaded round only by 2 of 3 processes (the others failed)"


def test_a_row_some_processes_lack_says_in_how_many(run_all: ModuleType) -> None:
    import _processes

    goal = ("goal", "f", "a", "1.2x", "<= 1.5x", "met", "0.5")
    side = ("side", "f", "a", "0.9x", "-", "-", "0.5")
    folded = _processes.fold([[goal, side], [goal], [goal, side]], [])
    assert folded[1][3].endswith("; in 2 of 3 processes")
    assert "; in " not in folded[0][3]  # every process had the goal row


def test_the_header_of_one_process_per_round_reads_as_before(run_all: ModuleType) -> None:
    loads = iter([2.0, 0.9, 0.7, 1.1])

    def taken(name: str, quick: bool) -> dict[str, Any]:
        return {"benchmark": name, "load": _load(next(loads))}

    alone = run_all.run_rounds(["spawn", "scale"], True, 2, 0, processes=1, runner=taken)
    assert run_all._rounds_note(alone, 2, 1) == (
        " 2 rounds, the quietest of each kept (round kept: spawn 2, scale 1)."
    )
    folded = [{"benchmark": "spawn", "processes": [_spawn(1.2)]}, alone[1]]
    assert run_all._rounds_note(folded, 2, 3).endswith(
        " 2 rounds, the quietest of each other benchmark kept (round kept: scale 1)."
    )


def test_a_result_without_a_process_is_said_unreadable(run_all: ModuleType) -> None:
    text = run_all.tables([{"benchmark": "spawn", "processes": []}])  # a hand-edited JSON
    assert "| spawn | unreadable | its JSON lists no process under 'processes': re-run it |" in text
