"""balance: the machine's balance of Python work against a thread hand-off, to place a ratio.

The goals are ratios to raw pykka (mostly thread hand-offs: wakes, the GIL passed on) or
absolute seconds (mostly Python), and their verdicts flip with the machine: session 15's
machine ran our in-memory mail at 0.94x raw, session 16's at 0.25x, because its Python ran
~2.6x slower while a hand-off cost the same. So every ``run_all`` records, before and after
its benchmarks, in a fresh interpreter:

- ``call_ns``: a small pure-Python function called in a loop (one argument, one addition):
  the cost of one Python call, the unit ``work_by_role`` counts the runtime's work in;
- ``attr_loop_ns``: one iteration of an attribute-heavy loop (an object's three attributes
  read and two written, as the runtime's actors and decisions do on every message);
- ``ask_us``: raw pykka's hand-off, one ``ask`` round trip from one actor to another
  (``pykka.ThreadingActor``s, the goals' own anchor: two hand-offs), and ``handoff_us``, half
  of it;
- ``calls_per_handoff``: how many such Python calls one hand-off costs: the balance itself
  (wall time; ``calls_per_handoff_cpu`` the same of the CPU both spent, which the load moves
  less: on a loaded machine a hand-off's wall is mostly waiting for a core).
  The lower it is (Python slow against a hand-off), the lower every Python-heavy path reads
  against raw pykka, whose ping-pong is mostly hand-offs. A unit to compare machines by, not
  a model of a path: the runtime's calls (``work_by_role``) are heavier than this one-line
  one (its ~312 calls per in-memory mail cost ~80 us of CPU where 312 of these cost ~30).

Each workload is fixed (the same calls, the same order, deterministic) and a few hundred
milliseconds long; each figure is the median of ``--repeats`` blocks, with the CPU the
process spent in them (a hand-off's wall above its CPU is time spent waiting for a core).
"""

from __future__ import annotations

import argparse
import time
from typing import Any, cast

import pykka

from _common import LoadWindow, emit, median, parse_args, rounded

CALLS = 400_000  # per block: ~30-80 ms on the machines seen so far
LOOPS = 200_000
ASKS = 2_000


def _step(x: int) -> int:
    return x + 1


def calls_block(n: int) -> tuple[float, float]:
    """(wall ns, CPU ns) per call of a one-line function, over ``n`` calls."""
    step, x = _step, 0
    cpu, start = time.process_time(), time.perf_counter()
    for _ in range(n):
        x = step(x)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    if x != n:
        raise RuntimeError(f"the call loop counted {x} of {n}")
    return wall / n * 1e9, cpu / n * 1e9


class _Record:
    """An object with a few attributes, as an actor's or a decision's state is."""

    def __init__(self) -> None:
        self.count, self.total, self.last = 0, 0, 0


def attr_block(n: int) -> tuple[float, float]:
    """(wall ns, CPU ns) per iteration of a loop reading three attributes, writing two."""
    record = _Record()
    cpu, start = time.process_time(), time.perf_counter()
    for i in range(n):
        record.total = record.total + record.last
        record.last = (i + record.count) & 0xFF
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    if record.count != 0 or record.last != (n - 1) & 0xFF:
        raise RuntimeError("the attribute loop went astray")
    return wall / n * 1e9, cpu / n * 1e9


class _Echo(pykka.ThreadingActor):
    def on_receive(self, message: Any) -> Any:
        return message + 1


class _Asker(pykka.ThreadingActor):
    """Asks the echo ``n`` times from its own thread, as ``mail.py``'s raw ping-pong does."""

    def __init__(self, other: pykka.ActorRef[Any]) -> None:
        super().__init__()
        self.other = other

    def on_receive(self, message: Any) -> tuple[float, float]:
        n, i = message, 0
        cpu, start = time.process_time(), time.perf_counter()
        for _ in range(n):
            i = cast(int, self.other.ask(i))
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
        if i != n:
            raise RuntimeError(f"the asks counted {i} of {n}")
        return wall / n * 1e6, cpu / n * 1e6


def ask_block(n: int) -> tuple[float, float]:
    """(wall us, CPU us of the whole process) per ``ask`` round trip between two actors."""
    echo = _Echo.start()
    asker = _Asker.start(echo)
    try:
        return cast(tuple[float, float], asker.ask(n, timeout=120.0))
    finally:
        asker.stop()
        echo.stop()


def measure(
    repeats: int, calls: int = CALLS, loops: int = LOOPS, asks: int = ASKS
) -> dict[str, Any]:
    """The balance's figures: each the median of ``repeats`` blocks, the blocks of the three
    workloads interleaved (a change of the machine's load hits all three)."""
    window = LoadWindow()
    taken: dict[str, list[tuple[float, float]]] = {"call": [], "attr": [], "ask": []}
    for _ in range(repeats):
        taken["call"].append(calls_block(calls))
        taken["attr"].append(attr_block(loops))
        taken["ask"].append(ask_block(asks))
    call_ns = median([w for w, _ in taken["call"]])
    ask_us = median([w for w, _ in taken["ask"]])
    call_cpu = median([c for _, c in taken["call"]])
    ask_cpu = median([c for _, c in taken["ask"]])
    return {
        "call_ns": rounded(call_ns, 1),
        "call_cpu_ns": rounded(call_cpu, 1),
        "calls_per_s": round(1e9 / call_ns),
        "attr_loop_ns": rounded(median([w for w, _ in taken["attr"]]), 1),
        "ask_us": rounded(ask_us, 2),
        "ask_cpu_us": rounded(ask_cpu, 2),
        "handoff_us": rounded(ask_us / 2, 2),
        "calls_per_handoff": round(ask_us / 2 * 1e3 / call_ns),
        "calls_per_handoff_cpu": round(ask_cpu / 2 * 1e3 / call_cpu),
        "sizes": {"calls": calls, "loops": loops, "asks": asks, "repeats": repeats},
        "load": window.record(),
    }


def _extra(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--repeats", type=int, default=None, help="blocks per figure (5)")


def main() -> None:
    args = parse_args(__doc__ or "", _extra)
    repeats = args.repeats or (1 if args.quick else 5)
    sizes = (CALLS // 20, LOOPS // 20, ASKS // 20) if args.quick else (CALLS, LOOPS, ASKS)
    figures = measure(repeats, *sizes)
    emit(
        "balance",
        {
            "figures": figures,
            "baseline": "none: the machine's own units (a Python call, a raw pykka ask)",
            "target": "none: a reading of the machine, to place the ratios of this run",
            "ratio": figures["calls_per_handoff"],
            "pass": None,
        },
        load=figures["load"],
    )


if __name__ == "__main__":
    main()
