"""spawn: spawn -> result of a trivial function agent, against raw pykka start + ask + stop.

Runtime: ``rt.run("trivial", task)`` one after another, where ``trivial(ctx)`` returns at once;
each run is admitted by the supervisor, recorded, started on its own actor thread, finished,
reported back and delivered to the caller. Measured with the MemoryStore (the default) and the
SQLite store. Raw: ``ThreadingActor.start()``, ``ask()``, ``stop()`` on a bare actor.

Target (issue 8): runtime latency <= 2x raw (p50; p99 and runs/s are reported too).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import pykka

from _common import emit, parse_args, percentile, quiet_logs, ratio, rounded, settle
from subagents.behaviour.function import AgentContext
from subagents.runtime import Runtime
from subagents.store.base import RunStore
from subagents.store.memory import MemoryStore
from subagents.store.sqlite import SQLiteStore

TARGET = 2.0


class _Trivial(pykka.ThreadingActor):
    def on_receive(self, message: Any) -> Any:
        return message


def trivial(ctx: AgentContext) -> str:
    """Returns its task at once."""
    return ctx.task


class _Sample:
    """Latencies and busy time of one contender, gathered over interleaved blocks."""

    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.elapsed = 0.0

    def summary(self) -> dict[str, float]:
        return {
            "p50_ms": rounded(percentile(self.latencies, 50) * 1e3),
            "p99_ms": rounded(percentile(self.latencies, 99) * 1e3),
            "runs_per_s": round(len(self.latencies) / self.elapsed, 1),
        }


def raw_block(n: int, sample: _Sample) -> None:
    start = time.perf_counter()
    for i in range(n):
        t = time.perf_counter()
        ref = _Trivial.start()
        if ref.ask(i) != i:
            raise RuntimeError("raw actor answered wrongly")
        ref.stop()
        sample.latencies.append(time.perf_counter() - t)
    sample.elapsed += time.perf_counter() - start


def runtime_block(rt: Runtime, n: int, sample: _Sample) -> None:
    start = time.perf_counter()
    for i in range(n):
        t = time.perf_counter()
        outcome = rt.run("trivial", str(i), wait=30)
        sample.latencies.append(time.perf_counter() - t)
        if outcome.result != str(i):
            raise RuntimeError(f"run {i} ended wrongly: {outcome!r}")
    sample.elapsed += time.perf_counter() - start


def _extra(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--n", type=int, default=None, help="runs per figure")
    parser.add_argument("--blocks", type=int, default=None, help="interleaved blocks")


def main() -> None:
    args = parse_args(__doc__ or "", _extra)
    quiet_logs()
    n = args.n or (50 if args.quick else 2000)
    blocks = args.blocks or (1 if args.quick else 5)
    per_block = max(1, n // blocks)
    samples = {"raw": _Sample(), "memory": _Sample(), "sqlite": _Sample()}
    raw_block(min(n, 100), _Sample())  # warm-up
    with tempfile.TemporaryDirectory(prefix="subagents-bench-") as tmp:
        stores: dict[str, RunStore] = {
            "memory": MemoryStore(),
            "sqlite": SQLiteStore(Path(tmp) / "s.db"),
        }
        runtimes = {kind: Runtime([trivial], store=store) for kind, store in stores.items()}
        try:
            for rt in runtimes.values():
                rt.run("trivial", "warm-up", wait=30)
            # Interleaved blocks: a change in the (shared) machine's load hits all three alike.
            for _ in range(blocks):
                raw_block(per_block, samples["raw"])
                settle()
                for kind, rt in runtimes.items():
                    runtime_block(rt, per_block, samples[kind])
                    settle()
        finally:
            for rt in runtimes.values():
                rt.close()
            for store in stores.values():
                store.close()
    baseline = samples["raw"].summary()
    figures: dict[str, Any] = {"raw": baseline}
    for kind in ("memory", "sqlite"):
        figure: dict[str, Any] = samples[kind].summary()
        figure["ratio_p50"] = ratio(figure["p50_ms"], baseline["p50_ms"])
        figure["ratio_p99"] = ratio(figure["p99_ms"], baseline["p99_ms"])
        figure["ratio_runs_per_s"] = ratio(baseline["runs_per_s"], figure["runs_per_s"])
        figure["pass"] = figure["ratio_p50"] <= TARGET
        figures[kind] = figure
    emit(
        "spawn",
        {
            "figures": figures,
            "baseline": "raw pykka: ThreadingActor.start() + ask() + stop(), same run",
            "target": "runtime p50 latency <= 2x raw (MemoryStore)",
            "ratio": {k: figures[k]["ratio_p50"] for k in ("memory", "sqlite")},
            "pass": bool(figures["memory"]["pass"]),
            "sizes": {"runs": per_block * blocks, "blocks": blocks},
            "seconds": rounded(time.perf_counter() - START, 2),
        },
    )


START = time.perf_counter()

if __name__ == "__main__":
    main()
