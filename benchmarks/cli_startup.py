"""How long the `subagents` command takes to answer `--version` and `--help`.

Each command is run as a fresh interpreter, several times, interleaved with the baseline:
`python -c pass` in the same interpreter (what no command can beat). The target is the
issue's: `--version` and `--help` answer in well under half a second (median < 0.3 s, and
within 0.25 s of the bare interpreter). `run --help` and `ps --help` are shown too (each
imports its own command's module), `ps` on an empty store, and `python -c "import
subagents.runtime"` (what every `subagents run` and every embedding program pays first), for
scale. Besides the wall-clock medians, ``cpu_median_s`` gives each one's CPU time (user +
system, from the children's rusage): steadier than the wall clock on a loaded machine.

Bytecode: every interpreter here reads compiled bytecode from a private cache
(``PYTHONPYCACHEPREFIX``, filled by one untimed warm-up run of each command), as an installed
package does (pip compiles on install). Where ``PYTHONDONTWRITEBYTECODE`` is set and no cache
exists (an editable checkout in such an environment), every start also compiles the package's
source, which about doubles these figures (benchmarks/README.md).
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time

from _common import emit, median, parse_args, rounded

TARGET_S = 0.3
COMMANDS = {
    "version": ["--version"],
    "help": ["--help"],
    "run_help": ["run", "--help"],
    "ps_help": ["ps", "--help"],
    "ps_empty_store": ["ps"],
}
IMPORT_RUNTIME = ["-c", "import subagents.runtime"]


def _time(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child) of one run of ``argv``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, capture_output=True, check=True, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    args = parse_args(__doc__ or "")
    repeats = 2 if args.quick else 9
    runs = {name: [sys.executable, "-m", "subagents.cli.main", *w] for name, w in COMMANDS.items()}
    runs["import_runtime"] = [sys.executable, *IMPORT_RUNTIME]
    with tempfile.TemporaryDirectory() as home, tempfile.TemporaryDirectory() as pycache:
        env = {**os.environ, "HOME": home, "SUBAGENTS_STATE_DIR": home}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = pycache
        # `ps` reads a store that exists (a read-only command creates none): an empty one
        subprocess.run(
            [sys.executable, "-c", "from subagents.store.paths import default_store_path;"
             " from subagents.store.sqlite import SQLiteStore;"
             " SQLiteStore(default_store_path()).close()"],
            check=True, env=env,
        )  # fmt: skip
        for argv in runs.values():  # the warm-up: writes the bytecode cache, not timed
            _time(argv, env)
        baseline: list[float] = []
        times: dict[str, list[float]] = {name: [] for name in runs}
        cpu: dict[str, list[float]] = {name: [] for name in runs}
        for _ in range(repeats):  # interleaved: a busy moment taxes all alike
            baseline.append(_time([sys.executable, "-c", "pass"], env)[0])
            for name, argv in runs.items():
                wall, used = _time(argv, env)
                times[name].append(wall)
                cpu[name].append(used)
    base = median(baseline)
    figures: dict[str, object] = {
        f"{name}_median_s": rounded(median(values)) for name, values in times.items()
    }
    figures["cpu_median_s"] = {name: rounded(median(values)) for name, values in cpu.items()}
    figures["python_pass_median_s"] = rounded(base)
    worst = max(median(times["version"]), median(times["help"]))
    emit(
        "cli_startup",
        {
            "figures": figures,
            "baseline": "`python -c pass` in the same interpreter, interleaved",
            "target": f"--version and --help median < {TARGET_S} s",
            "ratio": rounded(worst / TARGET_S),
            "pass": worst < TARGET_S,
            "over_bare_python_s": {
                name: rounded(median(values) - base) for name, values in times.items()
            },
            "sizes": {"repeats": repeats},
        },
    )


if __name__ == "__main__":
    main()
