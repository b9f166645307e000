"""Run every benchmark (each in its own process) and print the table of their figures.

    .venv/bin/python benchmarks/run_all.py            # full sizes, prints a markdown table
    .venv/bin/python benchmarks/run_all.py --readme   # ... and writes it into README.md
    .venv/bin/python benchmarks/run_all.py --quick    # tiny sizes: checks they all work

Each benchmark runs in a fresh interpreter so one's threads, memory and garbage do not skew
the next. The raw JSON objects are kept in ``results.json`` next to this file with ``--readme``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec

HERE = Path(__file__).resolve().parent
NAMES = ("mail", "spawn", "fanout", "scale", "deadlines", "peer", "tools", "cli_startup")
START_MARK = "<!-- results:start -->"
END_MARK = "<!-- results:end -->"

Row = tuple[str, str, str, str, str, str]


def run(name: str, quick: bool, timeout: float = 600.0) -> dict[str, Any]:
    """One benchmark's JSON object (or an ``error`` object naming what went wrong)."""
    command = [sys.executable, str(HERE / f"{name}.py"), *(["--quick"] if quick else [])]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"benchmark": name, "error": f"did not finish within {timeout:g} s"}
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-5:]
        return {"benchmark": name, "error": f"exit status {done.returncode}: {' | '.join(tail)}"}
    try:
        result: dict[str, Any] = msgspec.json.decode(done.stdout)
    except msgspec.DecodeError as exc:
        return {"benchmark": name, "error": f"stdout is not one JSON object: {exc}"}
    return result


def _ok(flag: Any) -> str:
    return {True: "yes", False: "**no**"}.get(flag, "-")


def _mail(r: dict[str, Any]) -> list[Row]:
    rows: list[Row] = []
    for shape in ("stream", "pingpong"):
        f = r["figures"][shape]
        raw = f"raw pykka {f['raw_msgs_per_s']:,} msg/s"
        for kind, label in (("sqlite", "durable (SQLite)"), ("memory", "in-memory")):
            e = f[kind]
            target = f">= {e['target']}x" if shape == "stream" else f"({e['target']}x)"
            rows.append(
                (
                    f"mail {shape}, {label}",
                    f"{e['msgs_per_s']:,} msg/s",
                    raw,
                    f"{e['ratio']}x",
                    target,
                    _ok(e["pass"]),
                )
            )
    return rows


def _spawn(r: dict[str, Any]) -> list[Row]:
    raw = r["figures"]["raw"]
    base = (
        f"raw start+ask+stop p50 {raw['p50_ms']} ms, p99 {raw['p99_ms']} ms, {raw['runs_per_s']} /s"
    )
    rows: list[Row] = []
    for kind in ("memory", "sqlite"):
        e = r["figures"][kind]
        rows.append(
            (
                f"spawn -> result ({kind})",
                f"p50 {e['p50_ms']} ms, p99 {e['p99_ms']} ms, {e['runs_per_s']} runs/s",
                base,
                f"p50 {e['ratio_p50']}x, p99 {e['ratio_p99']}x, rate {e['ratio_runs_per_s']}x",
                "<= 2x" if kind == "memory" else "(2x)",
                _ok(e["pass"]),
            )
        )
    return rows


def _fanout(r: dict[str, Any]) -> list[Row]:
    f = r["figures"]
    return [
        (
            "fan-out 1,000 x 50 ms, limit 100",
            f"makespan {f['makespan_s']} s",
            f"ideal {f['ideal_s']} s (raw pykka {f['raw_pykka_s']} s)",
            f"{r['ratio']}x",
            "<= 1.1x",
            _ok(r["pass"]),
        )
    ]


def _scale(r: dict[str, Any]) -> list[Row]:
    f, sizes = r["figures"], r["sizes"]
    capped = " (capped by the machine)" if sizes["capped_by_machine"] else ""
    return [
        (
            f"{sizes['measured']:,} waiting subagents{capped}",
            f"{f['runtime_kib_per_subagent']} KiB each (all waiting after"
            f" {f['seconds_to_all_waiting']} s)",
            f"raw pykka actor {f['raw_kib_per_actor']} KiB",
            f"{r['ratio']}x",
            "<= 2x",
            _ok(r["pass"]),
        )
    ]


def _deadlines(r: dict[str, Any]) -> list[Row]:
    f = r["figures"]
    load, stop = f["under_spawn_load"], f["stop_tree_100"]
    return [
        (
            f"timeout lateness ({r['sizes']['timeouts']:,} live runs)",
            f"p50 {f['lateness_p50_ms']} ms, p99 {f['lateness_p99_ms']} ms",
            "the deadline",
            f"p99 {r['ratio']}x of target",
            "p99 <= 10 ms",
            _ok(r["pass"]),
        ),
        (
            "timeout lateness while spawning",
            f"p50 {load['lateness_p50_ms']} ms, p99 {load['lateness_p99_ms']} ms",
            "the deadline",
            "-",
            "(10 ms)",
            _ok(load["lateness_p99_ms"] <= 10.0),
        ),
        (
            "stop a tree of 100 runs",
            f"answered {stop['answered_ms']} ms, threads ended {stop['threads_ended_ms']} ms",
            f"raw pykka stop of 100 actors {f['raw_stop_100_actors_ms']} ms",
            f"{f['stop_ratio_threads_ended_to_raw']}x",
            "-",
            "-",
        ),
    ]


def _peer(r: dict[str, Any]) -> list[Row]:
    if not r.get("available"):
        return [("peer (autogen-core)", "not measured", r.get("reason", ""), "-", "-", "-")]
    ours, theirs, ratios = r["figures"]["subagents"], r["figures"]["autogen"], r["ratio"]
    rows: list[Row] = []
    for shape in ("pingpong", "stream"):
        for kind in ("memory", "sqlite"):
            rows.append(
                (
                    f"peer {shape} ({kind}) vs autogen-core {r['autogen_core']}",
                    f"{ours[f'{shape}_{kind}_msgs_per_s']:,} msg/s",
                    f"autogen {theirs[f'{shape}_msgs_per_s']:,} msg/s",
                    f"{ratios[f'{shape}_{kind}']}x",
                    "-",
                    "-",
                )
            )
    rows.append(
        (
            "peer fan-out vs autogen-core",
            f"{ours['fanout_makespan_s']} s",
            f"autogen {theirs['fanout_makespan_s']} s",
            f"{ratios['fanout']}x (theirs / ours)",
            "-",
            "-",
        )
    )
    return rows


def _tools(r: dict[str, Any]) -> list[Row]:
    f = r["figures"]
    rows: list[Row] = []
    for mode, g in f["grep"].items():
        rows.append(
            (
                f"Grep {mode}, {f['files']:,} files",
                f"{g['grep_tool_ms']} ms",
                f"rg command line {g['rg_cli_ms']} ms",
                f"{g['ratio']}x",
                "<= 1.5x",
                _ok(g["ratio"] <= r["target"]),
            )
        )
    read, over, journal = f["read"], f["overhead"], f["journal"]
    rows.append(
        (
            "Read of a 1 MB file (first 2,000 lines)",
            f"{read['read_first_2000_lines_ms']} ms",
            f"Python read + split {read['python_read_and_split_ms']} ms",
            f"{read['ratio_first_2000']}x",
            "-",
            "-",
        )
    )
    rows.append(
        (
            "tool call through the tool path",
            f"{over['tool_path_us']} us",
            f"direct call {over['direct_us']} us",
            f"+{over['tool_path_overhead_us']} us",
            "-",
            "-",
        )
    )
    rows.append(
        (
            "journaled (side-effecting) call in a run, SQLite",
            f"{journal['side_effecting_us_per_call']} us",
            f"idempotent call {journal['idempotent_us_per_call']} us",
            f"+{journal['journal_round_trip_us']} us",
            "-",
            "-",
        )
    )
    return rows


def _cli_startup(r: dict[str, Any]) -> list[Row]:
    f = r["figures"]
    return [
        (
            "`subagents --version` / `--help`",
            f"{f['version_median_s']} s / {f['help_median_s']} s"
            f" (run --help {f['run_help_median_s']} s, ps --help {f['ps_help_median_s']} s)",
            f"python -c pass {f['python_pass_median_s']} s",
            f"{r['ratio']}x of target",
            "< 0.3 s",
            _ok(r["pass"]),
        )
    ]


ROWS: dict[str, Callable[[dict[str, Any]], list[Row]]] = {
    "mail": _mail,
    "spawn": _spawn,
    "fanout": _fanout,
    "scale": _scale,
    "deadlines": _deadlines,
    "peer": _peer,
    "tools": _tools,
    "cli_startup": _cli_startup,
}


def table(results: list[dict[str, Any]]) -> str:
    lines = [
        "| benchmark | figure | baseline | ratio | target | pass |",
        "|---|---|---|---|---|---|",
    ]
    for result in results:
        name = result["benchmark"]
        if "error" in result:
            lines.append(f"| {name} | failed: {result['error']} | - | - | - | **no** |")
            continue
        for row in ROWS[name](result):
            lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def _write_readme(text: str, results: list[dict[str, Any]]) -> None:
    readme = HERE / "README.md"
    content = readme.read_text(encoding="utf-8")
    head, _, rest = content.partition(START_MARK)
    _, _, tail = rest.partition(END_MARK)
    readme.write_text(f"{head}{START_MARK}\n{text}\n{END_MARK}{tail}", encoding="utf-8")
    (HERE / "results.json").write_bytes(msgspec.json.format(msgspec.json.encode(results)) + b"\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny sizes (checks, not figures)")
    parser.add_argument("--only", nargs="*", choices=NAMES, help="run only these")
    parser.add_argument("--readme", action="store_true", help="write the table into README.md")
    args = parser.parse_args()
    names = args.only or list(NAMES)
    results = []
    started = time.perf_counter()
    for name in names:
        print(f"running {name} ...", file=sys.stderr, flush=True)
        results.append(run(name, args.quick))
    machine: dict[str, Any] = next((r["machine"] for r in results if "machine" in r), {})
    command = "benchmarks/run_all.py" + (" --quick" if args.quick else "")
    header = (
        f"Taken {datetime.now(UTC):%Y-%m-%d %H:%M} UTC with `.venv/bin/python {command}`"
        f" in {time.perf_counter() - started:.0f} s on {machine.get('cores', '?')} cores,"
        f" Python {machine.get('python', '?')}, pykka {machine.get('pykka', '?')}."
    )
    text = f"{header}\n\n{table(results)}"
    print(text)
    if args.readme:
        _write_readme(text, results)


if __name__ == "__main__":
    main()
