"""Run every benchmark (each in its own process) and print the tables of their figures.

    .venv/bin/python benchmarks/run_all.py            # full sizes, prints markdown tables
    .venv/bin/python benchmarks/run_all.py --readme   # ... and writes them into README.md
    .venv/bin/python benchmarks/run_all.py --quick    # tiny sizes: checks they all work

Each benchmark runs in a fresh interpreter so one's threads, memory and garbage do not skew
the next. Two tables: the goals of issue 17, met or missed, and every other figure. The raw
JSON objects are kept in ``results.json`` next to this file with ``--readme``. The header says
how loaded the machine was (``/proc/loadavg`` before and after): figures taken on a loaded
machine are rough, whatever their ratios say.

``--rounds R`` runs every benchmark R times and keeps each one's quietest round; the short
ratio benchmarks (mail, spawn, fanout: goals near their lines) run ``--processes N`` times per
round instead (default 3), each a fresh interpreter measuring its own anchor, and their rows
show the median process with the range over all of them (``_processes.py``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec

from _common import LOADED_ABOVE, ratio  # a figure taken above LOADED_ABOVE is marked loaded
from _floor_rows import (
    BY_CPU,
    FLOOR,
    LOADED,
    NOT_AT_THIS_LOAD,
    close_floor,
    fanout_floor,
    mail_floors,
    one_spawn_floor,
    spawn_floor,
    spawn_many_floor,
)
from _processes import SHORT, fold

HERE = Path(__file__).resolve().parent
NAMES = (
    "mail",
    "spawn",
    "fanout",
    "scale",
    "deadlines",
    "load_definitions",
    "store_write",
    "store_postgres",
    "tools",
    "sandbox",
    "mcp_hub",
    "cli_startup",
    "console",
    "refusals",
    "cluster",
    "ray_costs",
)
START_MARK = "<!-- results:start -->"
END_MARK = "<!-- results:end -->"

Row = tuple[str, ...]
"""A table row: what, figure, anchor (same run), ratio, target or notes, verdict; and the load
it was taken at when a row maker knows it better than its script's (``_load_cell``)."""
LOADED_ONLY = "met in a loaded round only"
"""The verdict of a goal met by a figure taken above ``LOADED_ABOVE`` (``_quiet_verdict``)."""


def run(name: str, quick: bool, timeout: float = 1200.0) -> dict[str, Any]:
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


def _load_of(result: dict[str, Any]) -> dict[str, Any] | None:
    load = result.get("load")
    return load if isinstance(load, dict) and "max" in load else None


def _load_cell(load: dict[str, Any] | None) -> str:
    """The load a figure was taken at (the higher 1-minute average of its start and end),
    marked when above ``LOADED_ABOVE``."""
    if not load:
        return "?"
    top = load["max"]
    return f"**{top:.2f} loaded**" if load.get("loaded", top > LOADED_ABOVE) else f"{top:.2f}"


def _met(flag: Any) -> str:
    return {True: "met", False: "**missed**"}.get(flag, "-")


def _n(x: float) -> str:
    return f"{x:,.0f}"


# ---- the goals of issue 17 -------------------------------------------------------------------


def _goal_mail(r: dict[str, Any]) -> list[Row]:
    rows: list[Row] = []
    f = r["figures"]
    if "pingpong" in f:
        p = f["pingpong"]
        load = _load_cell(p.get("load"))
        ratio = p["memory_ratio_to_raw_ask"]
        rows.append(
            (
                "per-mail ping-pong, in memory",
                f"{_n(p['memory_msgs_per_s'])} msg/s",
                f"raw pykka ask ping-pong {_n(p['raw_ask_msgs_per_s'])} msg/s",
                f"{ratio}x",
                ">= 0.5x",
                _met(ratio >= 0.5),
                load,
            )
        )
        if "floor_msgs_per_s" in p:
            ratio = p["sqlite_ratio_to_floor"]
            hand_off = 1e6 / p["raw_ask_msgs_per_s"] if p["raw_ask_msgs_per_s"] else 0.0
            rows.append(
                (
                    "per-mail ping-pong, durable (SQLite) / its floor",
                    f"{_n(p['sqlite_msgs_per_s'])} msg/s",
                    f"floor {_n(p['floor_msgs_per_s'])} msg/s: a bare commit of a mail"
                    f" {p['bare_commit_us']} us + a raw hand-off {hand_off:.1f} us"
                    + (
                        " (done in turn: faster than their sum)"
                        if p.get("floor_by") == "raw_durable"
                        else ""
                    ),
                    f"{ratio}x",
                    ">= 0.7x",
                    _met(ratio >= 0.7),
                    load,
                )
            )
        in_memory, durable = mail_floors(p, load)  # each under its goal
        rows[1:1] = in_memory
        rows += durable
    for shape, label in (("pingpong", "per-mail 1:1"), ("n_to_one", "per-mail N:1")):
        e = f.get(shape, {})
        if shape in f and "autogen_msgs_per_s" not in e:  # a goal not measured is said so
            rows.append(_no_autogen(f"ahead of autogen-core: {label} (in memory)"))
        if "autogen_msgs_per_s" not in e:
            continue
        ratio = e["memory_ratio_to_autogen"]
        loaded = bool(e.get("load", {}).get("loaded"))
        verdict = _met(ratio > 1.0)
        if ratio > 1.0 and loaded:  # the goal asks for a quiet round too
            verdict = LOADED_ONLY
        rows.append(
            (
                f"ahead of autogen-core: {label} (in memory)",
                f"{_n(e['memory_msgs_per_s'])} msg/s (durable {_n(e['sqlite_msgs_per_s'])})",
                f"autogen-core {_n(e['autogen_msgs_per_s'])} msg/s",
                f"{ratio}x",
                "> 1x, in a quiet round too",
                verdict,
                _load_cell(e.get("load")),
            )
        )
    return rows


def _no_autogen(goal: str) -> Row:
    return (
        goal,
        "not measured",
        "autogen-core is not installed (`pip install -e '.[bench]'`)",
        "-",
        "> 1x",
        "**not measured**",
    )


def _goal_fanout(r: dict[str, Any]) -> list[Row]:
    f = r["figures"]
    sizes = r["sizes"]
    shape = f"{sizes['children']:,} x {sizes['delay_s'] * 1e3:g} ms, {sizes['limit']} at a time"
    if "store" in sizes:  # (older results do not say)
        shape += f", {sizes['store']} store"
    concurrency = f.get("max_concurrent", {}).get("runtime")
    seen = f", at most {concurrency} at once (measured)" if concurrency is not None else ""
    rows: list[Row] = [
        (
            f"fan-out {shape} (LLM workers)",
            f"makespan {f['makespan_s']} s{seen}",
            f"ideal {f['ideal_s']} s (asyncio {f['asyncio_s']} s ="
            f" {f['ideal_ratio']['asyncio']}x ideal)",
            f"{r['ratio']}x ideal",
            "<= 1.1x",
            _met(r["pass"]),
        ),
        *fanout_floor(f),
    ]
    if f.get("autogen_s") is not None:
        rows.append(
            (
                "ahead of autogen-core: fan-out",
                f"makespan {f['makespan_s']} s",
                f"autogen-core {f['autogen_s']} s",
                f"{f['ratio_to_autogen']}x (makespan: below 1 is ahead)",
                "< 1x",
                _met(f["ratio_to_autogen"] < 1.0),
            )
        )
    else:
        rows.append(_no_autogen("ahead of autogen-core: fan-out"))
    return rows


def _goal_scale(r: dict[str, Any]) -> list[Row]:
    f, sizes = r["figures"], r["sizes"]
    goal = f"{sizes['goal']:,} waiting runs"
    at = f.get("measured_at")
    attempt = f.get("attempt")
    rows: list[Row] = []
    if attempt is not None or not sizes["tried"]:
        first = attempt or f["runtime"]
        what = "not tried" if not first["tried"] else "failed"
        reason = first.get("reason") or first.get("failed") or what
        rows.append((goal, what, reason, "-", "possible at all", "**missed**"))
    where = f" (measured at {at:,})" if at and at != sizes["goal"] else ""
    raw = f["raw"]
    if not r.get("measured"):
        failed = f["runtime"].get("failed") or f["runtime"].get("reason") or raw.get("reason")
        rows.append((f"{goal}{where}", "failed", str(failed), "-", "-", "**missed**"))
        return rows
    g = r["goals"]
    ours = f["runtime"]
    final = sizes["tried"] and at == sizes["goal"]
    anchor = f"raw pykka {raw['n']:,} actors, own process:"

    def met(flag: bool) -> str:
        return _met(flag) if final else ("**missed**" if not flag else "met at the smaller n")

    one = f.get("per_run_spawn")
    if "start_one_spawn" in g and one is not None:
        rows.append(
            (
                f"{goal} started, one `spawn` each{where}",
                f"{one['start_s']} s (CPU {one.get('start_cpu_s')} s)",
                f"{anchor} started in {raw['start_s']} s",
                "-",
                f"< {g['start_one_spawn']['target']:g} s",
                met(g["start_one_spawn"]["pass"]),
                _load_cell(one.get("load")),
            )
        )
    side_load = _load_cell(ours.get("load"))
    least = ours.get("least_waiting")
    if one is not None:
        unbatched = one.get("least_one_spawn")
        one_load = _load_cell(one.get("load")) if unbatched is not None else side_load
        rows += one_spawn_floor(least, g, one_load, unbatched)
    rows += [
        (
            f"{goal} started with `spawn_many` (batches of {ours.get('batch')}){where}",
            f"{ours['start_s']} s (CPU {ours.get('start_cpu_s')} s)",
            f"{anchor} started in {raw['start_s']} s{_least_cell(ours)}",
            "-",
            f"< {g['start']['target']:g} s",
            met(g["start"]["pass"]),
            side_load,
        ),
        *spawn_many_floor(least, g, side_load),
        (
            f"{goal} closed{where}",
            f"{ours['close_s']} s (CPU {ours.get('close_cpu_s')} s)",
            f"{anchor} stopped in {raw['close_s']} s",
            "-",
            f"< {g['close']['target']:g} s",
            met(g["close"]["pass"]),
            side_load,
        ),
        *close_floor(ours.get("least_close"), g, side_load),
        (
            f"{goal}: memory each{where}",
            f"{ours['kib_each']} KiB",
            f"{anchor} {raw['kib_each']} KiB each",
            f"{g['memory']['ratio']}x",
            "<= 1.5x",
            met(g["memory"]["pass"]),
            side_load,
        ),
    ]
    return rows


def _least_cell(ours: dict[str, Any]) -> str:
    """The ``spawn_many`` row's own anchor (``scale.py``'s ``least_waiting``, and the
    supervisor's decisions of the same runs alone), when the side measured it."""
    least, decided = ours.get("least_waiting"), ours.get("decisions_alone")
    if least is None:
        return ""
    cell = (
        f"; the least a waiting run does, same n, same process: {least['start_s']} s"
        f" (CPU {least['start_cpu_s']} s)"
    )
    if decided is not None:
        cell += f", its decisions alone CPU {decided['start_cpu_s']} s"
    return cell


def _goal_spawn(r: dict[str, Any]) -> list[Row]:
    f = r["figures"]
    e, raw = f["memory"], f["raw_pooled"]
    target = r["target"].split("<= ", 1)[-1].split("x", 1)[0] if "<= " in r["target"] else "?"
    return [
        (
            "trivial spawn -> result, p50 (in memory)",
            f"{e['p50_ms']} ms",
            f"raw pykka start+ask+stop, reused thread {raw['p50_ms']} ms",
            f"{e['ratio_p50']}x",
            f"<= {target}x",
            _met(e["pass"]),
        ),
        *spawn_floor(f, target),
    ]


def _goal_load(r: dict[str, Any]) -> list[Row]:
    if not r.get("available"):
        return [("cold load of the corpus", "not measured", r.get("reason", ""), "-", "-", "-")]
    f = r["figures"]
    # results of an older script (--retable) have no "what": their "cold" was a warm repeat
    what = f["cold"].get("what", "a repeat in one process: an older script's, not cold")
    return [
        (
            f"cold load of {f['files']} definition files ({what})",
            f"{f['cold']['seconds']} s",
            f"read + CSafeLoader alone, the same way {f['cold']['raw_read_and_yaml_s']} s",
            f"{f['cold']['ratio_to_raw']}x that",
            "< 0.1 s",
            _met(r["pass"]),
        )
    ]


def _goal_cluster(r: dict[str, Any]) -> list[Row]:
    """Issue 16's goals: the runtime on a local 2-node Ray cluster."""
    f, b, q, met, sizes = r["figures"], r["baseline"], r["ratio"], r["met"], r["sizes"]
    shape = f"{sizes['children']:,} x {sizes['delay_s'] * 1e3:g} ms, {sizes['limit']} at once"
    return [
        (
            f"cluster (2 nodes): fan-out {shape}",
            f"makespan {f['fanout_s']} s",
            f"ideal {f['fanout_ideal_s']} s; one process {b['fanout_single_node_s']} s",
            f"{q['fanout_vs_ideal']}x ideal ({q['fanout_vs_single_node']}x one process)",
            "<= 1.2x ideal",
            _met(met["fanout"]),
        ),
        (
            "cluster: cross-node mail, batched",
            f"{_n(f['cross_node_mail_per_s'])} msg/s",
            f"one process {_n(b['single_node_mail_per_s'])} msg/s",
            f"{q['mail_vs_single_node']}x",
            ">= 10,000 msg/s",
            _met(met["mail"]),
        ),
        (
            "cluster: spawn -> result of a child on the other node, p50",
            f"{f['spawn_p50_ms']} ms (p99 {f['spawn_p99_ms']} ms)",
            f"one process {b['single_node_spawn_p50_ms']} ms",
            f"{q['spawn_p50_vs_single_node']}x",
            "<= 3 ms",
            _met(met["spawn"]),
        ),
        *_same_node_mail(f, b),
    ]


def _same_node_mail(f: dict[str, Any], b: dict[str, Any]) -> list[Row]:
    """Issue 26: mail between two runs of one node, per store (none in older results)."""
    if "same_node_pingpong_memory_per_s" not in f:
        return []
    per = "; ".join(
        f"{name} {_n(f[f'same_node_pingpong_{key}_per_s'])}"
        for key, name in (
            ("memory", "in memory"),
            ("sqlite", "SQLite"),
            ("cluster_store", "the cluster's store"),
        )
    )
    return [
        (
            "cluster: same-node mail ping-pong, round trips/s",
            per,
            f"one process (in memory) {_n(b['single_node_pingpong_per_s'])}/s",
            f"{ratio(f['same_node_pingpong_memory_per_s'], b['single_node_pingpong_per_s'])}x"
            " (in memory)",
            "straight on the node (issue 26)",
            "-",
        )
    ]


GOALS: dict[str, Callable[[dict[str, Any]], list[Row]]] = {
    "mail": _goal_mail,
    "fanout": _goal_fanout,
    "scale": _goal_scale,
    "spawn": _goal_spawn,
    "load_definitions": _goal_load,
    "cluster": _goal_cluster,
}

# ---- every other figure ----------------------------------------------------------------------


def _more_mail(r: dict[str, Any]) -> list[Row]:
    rows: list[Row] = []
    f = r["figures"]
    labels = {
        "pingpong": ("per-mail ping-pong 1:1", "raw_ask"),
        "n_to_one": (f"per-mail {r['sizes']['senders']} senders -> 1", "raw_ask"),
        "batched_stream": (
            f"batched stream: {r['sizes']['mails']:,} sends in ONE step (not per mail)",
            "raw_tell",
        ),
    }
    for shape, (label, base) in labels.items():
        if shape not in f:
            continue
        e = f[shape]
        cpu = e["cpu_us_per_msg"]
        ref = f", raw tell {_n(e['raw_tell_msgs_per_s'])}" if base == "raw_ask" else ""
        rows.append(
            (
                label,
                f"memory {_n(e['memory_msgs_per_s'])}, durable {_n(e['sqlite_msgs_per_s'])} msg/s",
                f"raw {base.split('_')[1]} {_n(e[f'{base}_msgs_per_s'])}{ref} msg/s",
                f"{e[f'memory_ratio_to_{base}']}x / {e[f'sqlite_ratio_to_{base}']}x",
                "CPU us/msg: " + ", ".join(f"{k.replace('_', ' ')} {v:g}" for k, v in cpu.items()),
                "-",
                _load_cell(e.get("load") or _load_of(r)),
            )
        )
    return rows


def _more_spawn(r: dict[str, Any]) -> list[Row]:
    f = r["figures"]
    raw, ref = f["raw_pooled"], f["raw_thread_per_actor"]
    base = (
        f"raw (reused thread) p50 {raw['p50_ms']} ms, p99 {raw['p99_ms']} ms, {raw['runs_per_s']}/s"
    )
    rows: list[Row] = []
    for kind in ("memory", "sqlite"):
        e = f[kind]
        rows.append(
            (
                f"spawn -> result ({kind})",
                f"p50 {e['p50_ms']} ms, p99 {e['p99_ms']} ms, {e['runs_per_s']} runs/s",
                base,
                f"p50 {e['ratio_p50']}x, p99 {e['ratio_p99']}x, rate {e['ratio_runs_per_s']}x",
                f"CPU {e['cpu_us_per_run']} us/run (raw {raw['cpu_us_per_run']})",
                "-",
            )
        )
    rows.append(
        (
            "raw pykka, a new thread per actor (reference)",
            f"p50 {ref['p50_ms']} ms, p99 {ref['p99_ms']} ms, {ref['runs_per_s']}/s",
            base,
            f"in-memory runtime p50 {f['memory']['ratio_p50_to_thread_per_actor']}x this",
            f"CPU {ref['cpu_us_per_run']} us/run",
            "-",
        )
    )
    return rows


def _more_fanout(r: dict[str, Any]) -> list[Row]:
    f = r["figures"]
    cpu = f["cpu_ms_per_child"]
    autogen = f" autogen-core {f['autogen_s']} s," if f.get("autogen_s") is not None else ""
    rows: list[Row] = [
        (
            "fan-out references, same run",
            f"runtime {f['makespan_s']} s",
            f"raw pykka {f['raw_pykka_s']} s,{autogen} asyncio {f['asyncio_s']} s",
            ", ".join(f"{k} {v}x" for k, v in f["ideal_ratio"].items()) + " of ideal",
            "CPU ms/child: " + ", ".join(f"{k} {v}" for k, v in cpu.items()),
            "-",
        )
    ]
    a = f.get("async_workers")
    if a is not None:
        limit = r["sizes"]["limit"]
        wider = a["max_concurrent"] > limit
        rows.append(
            (
                "fan-out, async workers (`await ctx.sleep`): "
                + (f"NOT {limit} at a time" if wider else f"at most {limit} at a time"),
                f"makespan {a['makespan_s']} s, at most {a['max_concurrent']} at once"
                f" (parked per trial: {a['parked_per_trial']})",
                f"ideal at {a['max_concurrent']} at once {a['ideal_at_that_concurrency_s']} s",
                f"{a['ratio_to_that_ideal']}x that ideal",
                "waiting runs lent their slots (parking): the limit bounds working runs,"
                " not sleeping ones"
                if wider
                else "a brief sleep keeps its slot (parking.BRIEF_SLEEP_S): measured, not assumed",
                "-",
            )
        )
    return rows


def _more_deadlines(r: dict[str, Any]) -> list[Row]:
    f = r["figures"]
    load, stop = f["under_spawn_load"], f["stop_tree_100"]
    return [
        (
            f"timeout lateness ({r['sizes']['timeouts']:,} live runs, steady: {f['steady']})",
            f"p50 {f['lateness_p50_ms']} ms, p99 {f['lateness_p99_ms']} ms",
            "the deadline",
            f"p99 {r['ratio']}x of target",
            "p99 <= 10 ms",
            _met(r["pass"]),
        ),
        (
            "timeout lateness while spawning",
            f"p50 {load['lateness_p50_ms']} ms, p99 {load['lateness_p99_ms']} ms"
            f" ({load['fired_before_all_waiting']} fired during the spawning)",
            "the deadline",
            "-",
            "(10 ms)",
            "-",
        ),
        (
            "stop a tree of 100 waiting runs",
            f"answered {stop['answered_ms']} ms, all actors stopped {stop['actors_stopped_ms']} ms",
            f"raw pykka stop of 100 actors {f['raw_stop_100_actors_ms']} ms",
            f"{f['stop_ratio_to_raw']}x",
            f"threads running agents (not one per run): {stop['runner_threads_live']} while"
            f" the 100 waited ({_kinds(stop.get('runner_threads_by_kind', {}))}),"
            f" {stop['runner_threads_after']} left parked/idle after",
            "-",
        ),
    ]


def _kinds(counts: dict[str, int]) -> str:
    return ", ".join(f"{kind} {n}" for kind, n in counts.items() if n) or "none"


def _more_load(r: dict[str, Any]) -> list[Row]:
    if not r.get("available"):
        return []
    f = r["figures"]
    u = f["reload_unchanged"]
    warm = f["warm"]
    return [
        (
            "definitions loaded again in the same process (warm; not the cold headline)",
            f"{warm['seconds']} s",
            f"read + CSafeLoader alone, warm {warm['raw_read_and_yaml_s']} s",
            f"{warm['ratio_to_raw']}x",
            f"the main process's first load {warm['first_of_the_main_process_s']} s",
            "-",
        ),
        (
            "hot-reload poll, nothing changed",
            f"{u['seconds'] * 1e3:.2f} ms",
            f"list + stat alone {u['raw_list_and_stat_s'] * 1e3:.2f} ms",
            f"{u['ratio_to_raw']}x",
            f"one touched file {f['reload_one_touched']['extra_over_unchanged_s'] * 1e3:+.2f} ms,"
            f" one edited {f['reload_one_edited']['extra_over_unchanged_s'] * 1e3:+.2f} ms",
            "-",
        ),
    ]


def _more_store(r: dict[str, Any]) -> list[Row]:
    f = r["figures"]
    return [
        (
            "store writes (save_run + append_event)",
            f"SQLite {_n(f['sqlite_batched_records_per_s'])}/s batched,"
            f" {_n(f['sqlite_unbatched_records_per_s'])}/s one commit each",
            f"MemoryStore {_n(f['memory_batched_records_per_s'])}/s",
            f"{f['sqlite_batched_vs_memory']}x",
            f"batching {f['sqlite_batching_speedup']}x",
            "-",
        )
    ]


def _more_tools(r: dict[str, Any]) -> list[Row]:
    f = r["figures"]
    rows: list[Row] = []
    for mode, g in f["grep"].items():
        label = f"Grep {mode}, {f['files']:,} files, the needle in 1 in 10"
        notes = f"target <= {r['target']}x (issue 12)"
        if mode == "files_with_matches_every_file":
            label = (
                f"Grep files_with_matches, {f['files']:,} files, every one matching"
                " (each stat'ed for the newest-first sort)"
            )
            sorted_ms = g.get("rg_cli_sorted_newest_first_ms")
            notes += f"; rg --sortr modified {sorted_ms} ms" if sorted_ms is not None else ""
        rows.append(
            (
                label,
                f"{g['grep_tool_ms']} ms",
                f"rg command line {g['rg_cli_ms']} ms",
                f"{g['ratio']}x",
                notes,
                _met(g["ratio"] <= r["target"]),
            )
        )
    read, over, journal = f["read"], f["overhead"], f["journal"]
    rows += [
        (
            "Read of a 1 MB file (first 2,000 lines)",
            f"{read['read_first_2000_lines_ms']} ms",
            f"Python read + split {read['python_read_and_split_ms']} ms",
            f"{read['ratio_first_2000']}x",
            "-",
            "-",
        ),
        (
            "tool call through the tool path",
            f"{over['tool_path_us']} us",
            f"direct call {over['direct_us']} us",
            f"+{over['tool_path_overhead_us']} us",
            "-",
            "-",
        ),
        (
            "journaled (side-effecting) call in a run, SQLite",
            f"{journal['side_effecting_us_per_call']} us",
            f"idempotent call {journal['idempotent_us_per_call']} us",
            f"+{journal['journal_round_trip_us']} us",
            "-",
            "-",
        ),
        (
            f"journaled call with a 1 KB answer, turn of {journal['long_turn_calls']:,} calls",
            f"{journal['long_turn_1kb_us_per_call']} us",
            f"turn of 20 calls {journal['short_turn_1kb_us_per_call']} us",
            f"{journal['long_turn_growth']}x",
            "~1x: a call's journal writes cost its own size, not the turn's",
            "-",
        ),
    ]
    return rows


def _more_mcp_hub(r: dict[str, Any]) -> list[Row]:
    f = r["figures"]
    return [
        (
            "MCP tool call through the hub, p50 / p99",
            f"{f['hub_call_p50_ms']} ms / {f['hub_call_p99_ms']} ms",
            f"mcp SDK call_tool {f['sdk_call_p50_ms']} ms / {f['sdk_call_p99_ms']} ms",
            f"{r['ratio']}x",
            f"target: {r['target']} (issue 12); in a run {f['runtime_call_ms']} ms,"
            f" cold start {f['hub_cold_start_s']} s",
            _met(r["pass"]),
        )
    ]


def _more_sandbox(r: dict[str, Any]) -> list[Row]:
    f = r["figures"]
    if "bash_call" not in f:
        return [("Bash call in the sandbox", "no Landlock here", "-", "-", r["note"], "-")]
    call, start = f["bash_call"], f["process_start"]
    return [
        (
            "Bash call (`true`) in the Landlock sandbox",
            f"{call['sandboxed_ms']} ms",
            f"unsandboxed {call['plain_ms']} ms",
            f"{call['ratio']}x",
            f"+{call['added_ms']} ms: the launcher (process start +{start['added_ms']} ms,"
            f" its interpreter {f['launcher_interpreter_ms']} ms)",
            "-",
        )
    ]


def _more_cli_startup(r: dict[str, Any]) -> list[Row]:
    f = r["figures"]
    return [
        (
            "`subagents --version` / `--help`",
            f"{f['version_median_s']} s / {f['help_median_s']} s"
            f" (run --help {f['run_help_median_s']} s, ps --help {f['ps_help_median_s']} s)",
            f"python -c pass {f['python_pass_median_s']} s",
            f"{r['ratio']}x of target",
            "target < 0.3 s (issue 15)",
            _met(r["pass"]),
        )
    ]


def _more_console(r: dict[str, Any]) -> list[Row]:
    f, b = r["figures"], r["baseline"]
    browser = f["browser_first_page_ms"]
    seen = f"; in Chromium {browser['median']} ms, worst {browser['worst']} ms" if browser else ""
    floor = b.get("browser_static_file_ms")
    floor_seen = f"; in Chromium {floor} ms" if floor is not None else ""
    return [
        (
            f"console: first page over {_n(f['runs'])} runs (read in {f['load_s']} s)",
            f"HTTP {f['first_page_ms']['median']} ms, worst {f['first_page_ms']['worst']} ms{seen}",
            f"a static file {b['static_file_ms']} ms{floor_seen}",
            f"{r['ratio']}x of target",
            "first page < 1 s, update p95 < 200 ms (issue 25)",
            _met(r["pass"]),
        ),
        (
            "console: a change reaching an open page",
            f"median {f['update_ms']['median']} ms, p95 {f['update_ms']['p95']} ms",
            f"poll every {b['poll_interval_ms']:g} ms",
            "-",
            "-",
            "-",
        ),
    ]


def _more_store_postgres(r: dict[str, Any]) -> list[Row]:
    """The PostgreSQL store beside SQLite, same run (issue 28): no goal, the choice's price."""
    f = r["figures"]
    ping, spawn, live, command = f["pingpong"], f["spawn"], f["live"], f["command"]
    return [
        (
            "PostgreSQL store: per-mail ping-pong",
            f"{_n(ping['postgres'])} mail/s (async commit {_n(ping['postgres_async'])})",
            f"SQLite {_n(ping['sqlite'])} mail/s",
            f"{r['ratio']['pingpong_postgres_vs_sqlite']}x",
            r.get("postgres_server", "-"),
            "-",
        ),
        (
            "PostgreSQL store: spawn -> result, p50",
            f"{spawn['postgres']['p50_ms']} ms"
            f" (async commit {spawn['postgres_async']['p50_ms']} ms)",
            f"SQLite {spawn['sqlite']['p50_ms']} ms",
            "-",
            f"{_n(live['postgres']['runs'])} live runs up in {live['postgres']['started_s']} s"
            f" (SQLite {live['sqlite']['started_s']} s)",
            "-",
        ),
        (
            "PostgreSQL store: a command reaching its run, p50",
            f"{command['postgres']['p50_ms']} ms ({command['postgres']['how']})",
            f"SQLite {command['sqlite']['p50_ms']} ms ({command['sqlite']['how']})",
            "-",
            "-",
            "-",
        ),
    ]


def _more_refusals(r: dict[str, Any]) -> list[Row]:
    figures = r["figures"]
    worst_name = max(figures, key=lambda k: figures[k]["max_s"])
    return [
        (
            f"refusing {len(figures)} kinds of definition bombs",
            f"worst {figures[worst_name]['max_s']} s ({worst_name})",
            f"an ordinary definition {r['baseline']['ordinary_definition_s']} s",
            f"{r['ratio']}x of target",
            f"target: {r['target']}",
            _met(r["pass"]),
        )
    ]


def _more_ray_costs(r: dict[str, Any]) -> list[Row]:
    """What Ray costs here (no targets: the figures the cluster design rests on)."""
    f, b = r["figures"], r["baseline"]
    calls, mail = f["call_p50_ms"], f["mail_per_s"]
    return [
        (
            "import ray",
            f"{f['import_ray_s']} s",
            f"python start {b['python_start_s']} s",
            "-",
            "-",
            "-",
        ),
        (
            "local 2-node Ray cluster started",
            f"{f['cluster_start_s']} s",
            f"{f['cluster_rss_mb']} MB resident",
            "-",
            "-",
            "-",
        ),
        (
            "a Ray actor started (a process)",
            f"{f['actor_start_s']} s",
            f"{f['actor_rss_mb']} MB each",
            "-",
            "-",
            "-",
        ),
        (
            "Ray call p50, cross node",
            f"{calls['actor_to_actor_cross_node']} ms",
            f"same node {calls['driver_to_actor_same_node']} ms",
            "-",
            "-",
            "-",
        ),
        (
            "items across nodes, batches of 100",
            f"{_n(mail['cross_node_batches_of_100'])}/s",
            f"one per call {_n(mail['cross_node_one_per_call'])}/s",
            "-",
            "-",
            "-",
        ),
    ]


def _more_balance(r: dict[str, Any]) -> list[Row]:
    """The machine's balance (``_balance.py``), read before and after the benchmarks."""
    rows: list[Row] = []
    for when, reading in zip(("before", "after"), r["readings"], strict=False):
        label = f"the machine's balance, {when} the benchmarks (a reading, not a goal)"
        if "error" in reading:
            rows.append((label, "failed", reading["error"], "-", "-", "-", "-"))
            continue
        b = reading["figures"]
        rows.append(
            (
                label,
                f"a Python call {b['call_ns']} ns (CPU {b['call_cpu_ns']});"
                f" an attribute loop's turn {b['attr_loop_ns']} ns",
                f"raw pykka ask round trip {b['ask_us']} us (CPU {b['ask_cpu_us']} us)",
                f"a hand-off = {b['calls_per_handoff']} calls (of CPU:"
                f" {b.get('calls_per_handoff_cpu', '?')})",
                "the lower, the lower a Python-heavy path reads against raw pykka (a unit to"
                " compare machines by)",
                "-",
                _load_cell(reading.get("load")),
            )
        )
    return rows


def balance_note(balance: dict[str, Any]) -> str:
    """The header's sentence of the machine's balance (before / after the benchmarks)."""
    taken = [r["figures"] for r in balance["readings"] if "figures" in r]
    if not taken:
        return " The machine's balance (`_balance.py`) failed: see its row."

    def both(key: str) -> str:
        return " / ".join(f"{b[key]:g}" for b in taken)

    return (
        f" The machine's balance (`_balance.py`, {'before / after' if len(taken) > 1 else 'once'}):"
        f" a Python call {both('call_ns')} ns, raw pykka's ask round trip {both('ask_us')} us,"
        f" so a hand-off costs {both('calls_per_handoff')} Python calls: ratios to raw pykka"
        " of a Python-heavy path fall as this falls."
    )


MORE: dict[str, Callable[[dict[str, Any]], list[Row]]] = {
    "balance": _more_balance,
    "mail": _more_mail,
    "spawn": _more_spawn,
    "fanout": _more_fanout,
    "deadlines": _more_deadlines,
    "load_definitions": _more_load,
    "store_write": _more_store,
    "store_postgres": _more_store_postgres,
    "tools": _more_tools,
    "sandbox": _more_sandbox,
    "mcp_hub": _more_mcp_hub,
    "cli_startup": _more_cli_startup,
    "console": _more_console,
    "refusals": _more_refusals,
    "ray_costs": _more_ray_costs,
}


def _table(header: str, rows: list[Row]) -> str:
    lines = [header, "|---|---|---|---|---|---|---|"]
    lines += ["| " + " | ".join(cell.replace("|", "/") for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def _with_load(rows: list[Row], result: dict[str, Any]) -> list[Row]:
    """Each row with the load its figure was taken at (its script's, unless the row says)."""
    cell = _load_cell(_load_of(result))
    return [row if len(row) == 7 else (*row, cell) for row in rows]


def _rows(result: dict[str, Any]) -> tuple[list[Row], list[Row]]:
    """One result's goal rows and other rows, or an error naming why it has none."""
    name = result["benchmark"]
    if "error" in result:
        raise _Unreadable(f"failed: {result['error']}")
    try:
        goals = _with_load(GOALS.get(name, lambda _r: [])(result), result)
        more = _with_load(MORE.get(name, lambda _r: [])(result), result)
    except (KeyError, TypeError) as exc:  # e.g. --retable of results an older script made
        raise _Unreadable(f"unreadable: its JSON has another shape (no {exc}): re-run it") from exc
    return goals, more


class _Unreadable(Exception):
    """A result without rows: it failed, or its JSON is not the shape the row makers read."""


def _failed_row(name: str, reason: str) -> Row:
    what, _, why = reason.partition(": ")
    return (name, what, why, "-", "-", "**missed**", "-")


def _rows_of_processes(name: str, results: list[dict[str, Any]]) -> tuple[list[Row], list[Row]]:
    """The rows of several processes of one benchmark, folded into one row each
    (``_processes.fold``: the median process's row, the range, every process's load)."""
    per_process: list[list[Row] | None] = []
    failed: list[str] = []
    goal_labels: set[str] = set()
    if not results:  # a hand-edited results.json: said, not an IndexError
        raise _Unreadable("unreadable: its JSON lists no process under 'processes': re-run it")
    for result in results:
        try:
            goals, more = _rows(result)
        except _Unreadable as exc:
            per_process.append(None)
            failed.append(str(exc))
            continue
        goal_labels.update(row[0] for row in goals)
        per_process.append(goals + more)
    if len(failed) == len(results):
        return [_failed_row(name, failed[0])], []
    folded = fold(per_process, failed)
    return (
        [row for row in folded if row[0] in goal_labels],
        [row for row in folded if row[0] not in goal_labels],
    )


def _quiet_verdict(row: Row) -> Row:
    """A goal met by a figure taken loaded reads ``met in a loaded round only``: load does not
    only slow us, it can flatter us (a woken thread starts sooner on a busy vCPU; the durable
    floor's bare commit slows more than the runtime's mail; autogen-core's one event loop
    suffers more than our threads: our fan-out's makespan read 0.59x of its at load 9-14,
    1.08x quiet). Any verdict that starts with ``met`` (``met by K of N processes (the others
    failed)`` too) keeps what follows: ``met in a loaded round only by K of N ...``."""
    verdict = row[5]
    if verdict.startswith("met") and not verdict.startswith(LOADED_ONLY) and "loaded" in row[6]:
        return (*row[:5], LOADED_ONLY + verdict.removeprefix("met"), *row[6:])
    floor = row[0].startswith(FLOOR) and not verdict.endswith((BY_CPU, LOADED, NOT_AT_THIS_LOAD))
    if floor and "loaded" in row[6]:  # a design's floor read loaded: either way rough
        return (*row[:5], verdict + LOADED, *row[6:])
    return row


def tables(results: list[dict[str, Any]]) -> str:
    goals: list[Row] = []
    more: list[Row] = []
    for result in results:
        name = result["benchmark"]
        try:
            if "processes" in result:
                rows = _rows_of_processes(name, result["processes"])
            else:
                rows = _rows(result)
        except _Unreadable as exc:
            goals.append(_failed_row(name, str(exc)))
            continue
        goals += [_quiet_verdict(row) for row in rows[0]]
        more += rows[1]
    cells = [row[6] for row in goals + more]
    loaded = sum(1 for cell in cells if "loaded" in cell)
    note = (
        f"{loaded} of {len(cells)} rows were taken above load {LOADED_ABOVE} (marked **loaded**;"
        " a row of several processes when any of them was: rough figures, to be re-taken in a"
        " quiet round)."
        if loaded
        else f"Every row was taken at load {LOADED_ABOVE} or below."
    )
    several = [r["benchmark"] for r in results if len(r.get("processes", ())) > 1]
    processes = (
        f" The rows of {', '.join(several)} fold several processes (fresh interpreters, each"
        " measuring its own anchor): each shows the median process's row whole (figure, anchor,"
        " ratio, verdict of that one process; of an even count the worse middle one), the range"
        " of the ratio over every process and each process's load."
        if several
        else ""
    )
    return (
        "Goals (issue 26; issue 17's and 16's still standing). Each row's anchor was measured"
        " in the same run as its figure (mail, spawn, fanout: in the same process; scale's raw"
        " side in its own process, as its rows say); `load` is the 1-minute load average the"
        " figure was taken at (the higher of its start and end; a benchmark alone reads ~1 on"
        " these 2 vCPUs). "
        + note
        + processes
        + "\n\n"
        + _table("| goal | figure | anchor (same run) | ratio | target | | load |", goals)
        + "\n\nEverything else:\n\n"
        + _table("| benchmark | figure | baseline | ratio | notes | | load |", more)
    )


def _write_readme(text: str, results: list[dict[str, Any]]) -> None:
    """Replace the text between the markers of README.md; keep the JSON in results.json."""
    readme = HERE / "README.md"
    content = readme.read_text(encoding="utf-8")
    head, _, rest = content.partition(START_MARK)
    _, _, tail = rest.partition(END_MARK)
    readme.write_text(f"{head}{START_MARK}\n{text}\n{END_MARK}{tail}", encoding="utf-8")
    (HERE / "results.json").write_bytes(msgspec.json.format(msgspec.json.encode(results)) + b"\n")


def _load_1min() -> float:
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return -1.0


def wait_quiet(limit_s: float, threshold: float = LOADED_ABOVE) -> dict[str, Any]:
    """Wait up to ``limit_s`` for the 1-minute load average to come down to ``threshold``
    (polled every 5 s); how long it waited and the load it starts at. The 1-minute average
    decays with a time constant of a minute: after a busy benchmark it takes a while."""
    started = time.perf_counter()
    load = _load_1min()
    while load > threshold and time.perf_counter() - started < limit_s:
        time.sleep(min(5.0, max(0.0, limit_s - (time.perf_counter() - started))))
        load = _load_1min()
    return {
        "waited_s": round(time.perf_counter() - started, 1),
        "load_at_start": load,
        "quiet": load <= threshold,
    }


def _loudness(result: dict[str, Any]) -> tuple[int, float]:
    """How loaded a round's result was: an error is the worst, then the higher load."""
    load = _load_of(result)
    return (1 if "error" in result else 0, load["max"] if load else float("inf"))


def quietest(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """The round of one benchmark taken at the lowest load (a failed round only when every
    round failed), saying which it was and the load of every round."""
    kept = min(range(len(rounds)), key=lambda i: _loudness(rounds[i]))
    loads = [(_load_of(r) or {}).get("max") for r in rounds]
    return {**rounds[kept], "rounds": {"kept": kept + 1, "of": len(rounds), "loads": loads}}


def run_rounds(
    names: list[str],
    quick: bool,
    rounds: int,
    wait_s: float,
    processes: int = 1,
    runner: Callable[[str, bool], dict[str, Any]] = run,
) -> list[dict[str, Any]]:
    """Every benchmark ``rounds`` times (whole passes, so the rounds are spread in time), each
    after waiting up to ``wait_s`` for a quiet machine. A long benchmark keeps its quietest
    round; a short ratio one (``_processes.SHORT``) runs ``processes`` times per round, its
    passes interleaved with the other short ones' and first in the round, before the long
    ones drive the load up (each a fresh interpreter), and with more than one keeps every
    process of every round for the table to fold (``gather``). ``runner`` runs one
    benchmark's process (``run``; a test gives its own to check the order without timing)."""
    taken: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    short = [name for name in names if name in SHORT]
    plan = [(p, name) for p in range(processes) for name in short]
    plan += [(0, name) for name in names if name not in SHORT]
    for index in range(rounds):
        for process, name in plan:
            quiet = wait_quiet(wait_s) if wait_s > 0 else None
            print(
                f"round {index + 1}/{rounds}, pass {process + 1}/{processes}: running"
                f" {name} (load {_load_1min():.2f}) ...",
                file=sys.stderr,
                flush=True,
            )
            began = time.perf_counter()
            result = runner(name, quick)
            if quiet is not None:
                result["quiet_wait"] = quiet
            seconds = round(time.perf_counter() - began, 1)
            result["taken_in"] = {"round": index + 1, "pass": process + 1, "seconds": seconds}
            taken[name].append(result)
    return [gather(name, taken[name], processes) for name in names]


def gather(name: str, results: list[dict[str, Any]], processes: int) -> dict[str, Any]:
    """What the table reads of one benchmark's runs: every process (``processes``) of a
    short ratio benchmark run more than once per round, else the quietest round."""
    if processes > 1 and name in SHORT:
        return {"benchmark": name, "processes": results}
    return quietest(results)


def each_process(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every process's result, those folded in ``processes`` included."""
    return [p for r in results for p in r.get("processes", [r])]


def _load() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def _rounds_note(results: list[dict[str, Any]], rounds: int, processes: int) -> str:
    """What the header says of the rounds and processes each figure was read from."""
    note = ""
    folded = [r["benchmark"] for r in results if "processes" in r]
    if folded:
        note += (
            f" {', '.join(folded)}: {processes} processes per round, {processes * rounds} in all,"
            " folded (the median process's row, the range, every process's load)."
        )
    kept = ", ".join(f"{r['benchmark']} {r['rounds']['kept']}" for r in results if "rounds" in r)
    if rounds > 1 and kept:  # as before --processes when no benchmark is folded
        each = "each other benchmark" if folded else "each"
        note += f" {rounds} rounds, the quietest of {each} kept (round kept: {kept})."
    return note


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny sizes (checks, not figures)")
    parser.add_argument("--only", nargs="*", choices=NAMES, help="run only these")
    parser.add_argument("--readme", action="store_true", help="write the tables into README.md")
    parser.add_argument("--note", default="", help="a sentence for the header (e.g. the load)")
    parser.add_argument(
        "--json",
        type=Path,
        default=None,
        metavar="PATH",
        help="also write the results' JSON there (README.md and results.json untouched)",
    )
    parser.add_argument(
        "--retable", action="store_true", help="only rebuild README's tables from results.json"
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="run every benchmark this many times (whole passes) and keep the quietest round",
    )
    parser.add_argument(
        "--processes",
        type=int,
        default=3,
        metavar="N",
        help=f"run the short ratio benchmarks ({', '.join(SHORT)}) N times per round, each a"
        " fresh interpreter, and show the median process with the range (1: one per round,"
        " the quietest round kept, as the long ones)",
    )
    parser.add_argument(
        "--wait-quiet",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help=f"before each benchmark wait up to this long for load <= {LOADED_ABOVE}",
    )
    args = parser.parse_args()
    if args.retable:
        readme = (HERE / "README.md").read_text(encoding="utf-8")
        header = readme.partition(START_MARK)[2].strip().split("\n", 1)[0]
        results = msgspec.json.decode((HERE / "results.json").read_bytes())
        _write_readme(f"{header}\n\n{tables(results)}", results)
        return
    names = args.only or list(NAMES)
    started = time.perf_counter()
    load_before = _load()
    rounds = max(1, args.rounds)
    processes = max(1, args.processes)
    before = run("_balance", args.quick)  # the machine's balance, in a fresh interpreter
    results = run_rounds(names, args.quick, rounds, max(0.0, args.wait_quiet), processes)
    taken = each_process(results)
    balance = {"benchmark": "balance", "readings": [before, run("_balance", args.quick)]}
    results.insert(0, balance)
    machine: dict[str, Any] = next((r["machine"] for r in taken if "machine" in r), {})
    command = "benchmarks/run_all.py" + (" --quick" if args.quick else "")
    if rounds > 1:
        command += f" --rounds {rounds}"
    command += f" --processes {processes}"
    if args.wait_quiet > 0:
        command += f" --wait-quiet {args.wait_quiet:g}"
    header = (
        f"Taken {datetime.now(UTC):%Y-%m-%d %H:%M} UTC with `.venv/bin/python {command}`"
        f" in {time.perf_counter() - started:.0f} s on {machine.get('cores', os.cpu_count())}"
        f" cores, Python {machine.get('python', '?')}, pykka {machine.get('pykka', '?')};"
        f" load average {load_before} before, {_load()} after."
    )
    if args.wait_quiet > 0:
        loud_names = [
            r["benchmark"] for r in taken if not r.get("quiet_wait", {}).get("quiet", True)
        ]
        loud = [
            name if count == 1 else f"{name} ({count} processes)"
            for name, count in Counter(loud_names).items()
        ]
        header += (
            f" Each benchmark waited up to {args.wait_quiet:g} s for load <= {LOADED_ABOVE};"
            + (f" started loaded all the same: {', '.join(loud)}." if loud else " all got it.")
        )
    header += _rounds_note(results, rounds, processes)
    header += balance_note(balance)
    if args.note:
        header += f" {args.note}"
    text = f"{header}\n\n{tables(results)}"
    print(text)
    if args.readme:
        _write_readme(text, results)
    if args.json is not None:
        args.json.write_bytes(msgspec.json.format(msgspec.json.encode(results)) + b"\n")


if __name__ == "__main__":
    main()
