"""How long the `subagents` command takes to answer `--version` and `--help`.

Each command is run as a fresh interpreter, several times, interleaved with the baseline:
`python -c pass` in the same interpreter (what no command can beat). The target is the
issue's: `--version` and `--help` answer in well under half a second (median < 0.3 s, and
within 0.25 s of the bare interpreter). `run --help` and `ps --help` are shown too (each
imports its own command's module), and `ps` on an empty store, for scale.
"""

from __future__ import annotations

import os
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


def _time(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, capture_output=True, check=True, env=env)
    return time.perf_counter() - start


def main() -> None:
    args = parse_args(__doc__ or "")
    repeats = 2 if args.quick else 9
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "HOME": home, "SUBAGENTS_STATE_DIR": home}
        baseline: list[float] = []
        times: dict[str, list[float]] = {name: [] for name in COMMANDS}
        for _ in range(repeats):  # interleaved: a busy moment taxes all alike
            baseline.append(_time([sys.executable, "-c", "pass"], env))
            for name, words in COMMANDS.items():
                argv = [sys.executable, "-m", "subagents.cli.main", *words]
                times[name].append(_time(argv, env))
    base = median(baseline)
    figures = {f"{name}_median_s": rounded(median(values)) for name, values in times.items()}
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
