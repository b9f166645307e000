"""``benchmarks/_instructions.py`` counts instructions per unit of work under callgrind. Here,
without valgrind: each shape's workload runs (natively, tiny), and the count of a shape is the
difference of its two runs over ``n``, both with the same hash seed. Figures never asserted."""

from __future__ import annotations

import json
import shutil
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


def _fake_callgrind(command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """A valgrind run answered without valgrind: per unit 300 instructions, of which the watch
    thread's 50 and the timer's 20 (its output file written as callgrind writes it: a role's
    function named once, then by its id) and the cyclic collector's 40, what a counted run's
    child prints of its threads."""
    units = int(command[command.index("--n") + 1])
    out = next(arg.split("=", 1)[1] for arg in command if arg.startswith("--callgrind-out-file"))
    Path(out).write_text(
        "events: Ir\nfn=(1) main\n0 5\n"
        f"cfn=(7) judge_clock_watch\ncalls=1 0\n0 {1_000 + 50 * units}\n"
        f"cfn=(8) judge_clock_timer\ncalls=1 0\n0 {20 * units}\n"
        f"fn=(2) other\n0 1\ncfn=(7)\ncalls=1 0\n0 {10}\n"
        f"cfn=(9) gc_collect_main\ncalls=3 0\n0 {40 * units}\n"
        f"fn=(3) more\n0 1\ncfn=(9)\ncalls=1 0\n0 4\n"
    )
    refs = 1_000_000 + 300 * units  # imports and start, then 300 per unit
    threads = f'judge-threads-started: {{"work": {units // 10}, "watch": 2}}'
    return subprocess.CompletedProcess(command, 0, "", f"{threads}\n==1== Collected : {refs:,}\n")


def test_a_units_count_is_the_two_runs_difference_under_one_seed_less_the_clocks_threads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    instructions = _module()
    seen: list[tuple[list[str], dict[str, str]]] = []
    compiles = subprocess.run

    def run(command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        if command[0] != "valgrind" and "--child" not in command:
            return compiles(command, **kwargs)  # (the role functions, really compiled)
        seen.append((command, kwargs["env"]))
        if command[0] != "valgrind":
            return subprocess.CompletedProcess(command, 0, "", "")
        return _fake_callgrind(command, **kwargs)

    monkeypatch.setattr(instructions.subprocess, "run", run)
    monkeypatch.setattr(instructions._clock_threads.subprocess, "run", run)
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    got = instructions.figure("pingpong", 50, 7)
    if got.split:
        pytest.skip(f"no role functions here: {got.split}")
    assert (got.per_unit, got.all_threads) == (230, 300)  # the watch's, the timer's left out
    assert got.roles == {"watch": 50, "checkpoint": 0, "lease": 0, "timer": 20}
    assert got.threads_started == {"work": 0.1, "watch": 0}
    assert got.collector == 40  # (not left out: printed beside)
    # a native run first (it compiles what both counted runs read), then the two counted
    assert [command[0] == "valgrind" for command, _ in seen] == [False, True, True]
    assert [command[command.index("--n") + 1] for command, _ in seen[1:]] == ["100", "50"]
    assert all("pingpong" in command for command, _ in seen)
    assert {env["PYTHONHASHSEED"] for _, env in seen} == {"7"}
    assert not any("PYTHONDONTWRITEBYTECODE" in env for _, env in seen)
    libraries = {env.get(instructions._clock_threads.LIBRARY_ENV) for _, env in seen[1:]}
    assert len(libraries) == 1 and None not in libraries


def test_without_a_compiler_every_thread_is_counted_and_the_figure_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    instructions = _module()
    monkeypatch.setattr(instructions._clock_threads.shutil, "which", lambda name: None)

    def run(command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        assert instructions._clock_threads.LIBRARY_ENV not in kwargs["env"]
        if command[0] != "valgrind":
            return subprocess.CompletedProcess(command, 0, "", "")
        units = int(command[command.index("--n") + 1])
        return subprocess.CompletedProcess(command, 0, "", f"Collected : {300 * units}\n")

    monkeypatch.setattr(instructions.subprocess, "run", run)
    got = instructions.figure("spawn", 10, 0)
    assert (got.per_unit, got.all_threads, got.roles) == (300, 300, {})
    assert "no C compiler" in got.split


def test_a_failed_valgrind_run_is_an_error_naming_the_shape(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    instructions = _module()

    def run(command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(command, 1, "", "valgrind: not found")

    monkeypatch.setattr(instructions.subprocess, "run", run)
    with pytest.raises(RuntimeError, match="spawn"):
        instructions.per_unit("spawn", 10, 0)


def _clock_threads() -> Any:
    return _module()._clock_threads


def test_a_threads_role_is_told_by_its_name() -> None:
    role_of = _clock_threads().role_of
    assert role_of("subagents-dispatch-watch") == "watch"
    assert role_of("subagents-wal-checkpoint") == "checkpoint"
    assert role_of("subagents-lease") == "lease"
    assert role_of("subagents-timer") == "timer"
    assert role_of("subagents-dispatch-3") is None
    assert role_of("MainThread") is None


def test_role_costs_are_read_from_compressed_and_plain_names() -> None:
    text = [
        "fn=(4) judge_clock_watch",  # named where it runs first
        "0 9",
        "fn=(5) caller",
        "cfn=(4)",
        "calls=1 0",
        "0 1000",
        "cfn=(6) judge_clock_lease_helper",  # another function: not a role's
        "calls=2 0",
        "0 70",
        "cfn=judge_clock_checkpoint",
        "calls=1 0",
        "0 30",
        "cfn=(4)",
        "calls=1 0",
        "0 5",
    ]
    assert _clock_threads().clock_costs(text) == {
        "watch": 1005,
        "checkpoint": 30,
        "lease": 0,
        "timer": 0,
    }


def test_the_collectors_cost_is_its_calls_inclusive_cost_under_any_name_form() -> None:
    text = [
        "fn=(3) gc_collect_main",  # named where it runs first, then called by its id
        "0 900",
        "fn=(5) caller",
        "cfn=(3)",
        "calls=1 0",
        "0 1000",
        "cfn=(6) gc_collect_main_helper",  # another function: not the collector
        "calls=2 0",
        "0 70",
        "cfn=gc_collect_main",
        "calls=1 0",
        "0 30",
        "0 8",  # (the caller's own cost: not a call's)
    ]
    assert _module().collector_cost(text) == 1030


def _library(tmp_path: Path) -> Path:
    library, why_not = _clock_threads().build(tmp_path)
    if library is None:
        pytest.skip(why_not)
    return library


_SPIN = """
import sys, threading
from collections import Counter
from pathlib import Path
sys.path.insert(0, {benchmarks!r})
import _clock_threads

started = Counter()
_clock_threads.install(Path({library!r}), started)

def spin(k):
    x = 0
    for i in range(k):
        x += i

watch = threading.Thread(target=spin, args=({watch},), name="d-watch")
work = threading.Thread(target=spin, args=({work},), name="d-1")
watch.start(); work.start(); watch.join(); work.join()
print(dict(started))
"""


def test_under_callgrind_a_clock_threads_work_is_its_roles_and_no_other(
    tmp_path: Path,
) -> None:
    """A real callgrind run of a tiny program: a watch thread and a work thread spin; doubling
    the watch's spin moves the watch's role cost by what the whole count moved, and doubling
    the work's spin moves the count and not the role's."""
    if shutil.which("valgrind") is None:
        pytest.skip("no valgrind")
    library = _library(tmp_path)

    def counted(watch: int, work: int) -> tuple[int, int]:
        script = tmp_path / "spin.py"
        script.write_text(
            _SPIN.format(benchmarks=str(BENCHMARKS), library=str(library), watch=watch, work=work)
        )
        out = tmp_path / f"callgrind.{watch}.{work}"
        command = [sys.executable, str(script)]
        env = _module()._environment(0)  # the seed fixed, bytecode written
        subprocess.run(command, capture_output=True, env=env, timeout=60, check=True)
        done = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *command],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        assert "'watch': 1, 'work': 1" in done.stdout
        total = int(_module()._REFS.findall(done.stderr)[-1].replace(",", ""))
        with out.open() as lines:
            return total, _clock_threads().clock_costs(lines)["watch"]

    base, base_watch = counted(20_000, 20_000)
    more_watch, watch = counted(60_000, 20_000)
    more_work, work_watch = counted(20_000, 60_000)
    assert base_watch > 0
    spun = more_watch - base
    assert abs((watch - base_watch) - spun) < 0.02 * spun  # the watch's work: its role's
    assert more_work - base > 0.9 * spun  # the work's: counted
    assert abs(work_watch - base_watch) < 0.02 * spun  # and not the watch's


def test_a_role_threads_exception_reaches_the_excepthook_as_before(tmp_path: Path) -> None:
    library = _library(tmp_path)
    script = tmp_path / "raises.py"
    script.write_text(
        "import sys, threading\n"
        "from collections import Counter\n"
        "from pathlib import Path\n"
        f"sys.path.insert(0, {str(BENCHMARKS)!r})\n"
        "import _clock_threads\n"
        "started = Counter()\n"
        f"_clock_threads.install(Path({str(library)!r}), started)\n"
        "seen = []\n"
        "threading.excepthook = lambda args: seen.append((args.exc_type, args.thread.name))\n"
        "def fail():\n"
        "    raise KeyError('from the watch')\n"
        "thread = threading.Thread(target=fail, name='d-watch')\n"
        "thread.start(); thread.join()\n"
        "print(seen, dict(started))\n"
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[(<class 'KeyError'>, 'd-watch')] {'watch': 1}"


def _judged(per_unit: int, timer: int, **extra: Any) -> dict[str, Any]:
    roles = {"watch": 1_000, "checkpoint": 0, "lease": 0, "timer": timer}
    return {
        "pingpong": {
            "per_unit": per_unit,
            "n": 150,
            "all_threads": per_unit + sum(roles.values()),
            "roles": roles,
            "threads_started": {"work": 0.01, "watch": 0, "timer": 0},
            **extra,
        },
        "seed": 0,
    }


def test_a_cut_that_moved_work_onto_the_timers_thread_is_flagged() -> None:
    """B's per_unit 10k lower, its timer's thread 10k busier: work moved, not removed."""
    compare = _module().compare
    got = compare(_judged(200_000, 9_000), _judged(190_000, 19_000, collector=40_000))["pingpong"]
    assert got["per_unit"] == [200_000, 190_000]
    assert got["left_out"] == [10_000, 20_000]
    assert got["collector"] == [None, 40_000]  # (printed beside; A from before it was counted)
    assert "left-out work grew 10000" in got["flag"]
    assert compare(_judged(200_000, 9_000), _judged(190_000, 9_500))["pingpong"]["flag"] == ""


def test_roles_split_unlike_or_clock_threads_started_per_unit_are_flagged() -> None:
    compare = _module().compare
    unsplit = _judged(300_000, 0, roles={}, split="no C compiler (cc): every thread counted")
    assert "not split alike" in compare(_judged(200_000, 9_000), unsplit)["pingpong"]["flag"]
    per_unit_timer = _judged(200_000, 9_000)
    per_unit_timer["pingpong"]["threads_started"]["timer"] = 1.0  # a timer per unit
    flag = compare(_judged(200_000, 9_000), per_unit_timer)["pingpong"]["flag"]
    assert flag == "timer threads started per unit changed"


def test_the_cli_compares_two_outputs(tmp_path: Path) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(_judged(200_000, 9_000)))
    b.write_text(json.dumps(_judged(190_000, 19_000)))
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "_instructions.py"), "--compare", str(a), str(b)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "left-out work grew" in json.loads(done.stdout)["pingpong"]["flag"]


def test_a_failing_compile_counts_every_thread_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = _clock_threads()
    failing = shutil.which("false")  # a "compiler" that fails
    monkeypatch.setattr(clock.shutil, "which", lambda name: failing)
    library, why_not = clock.build(tmp_path)
    assert library is None and why_not.startswith("cc failed")
