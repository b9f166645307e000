"""fanout: makespan of 1,000 children, each one 50 ms model call, 100 at a time.

A function agent spawns 1,000 ``worker`` children at once and gathers their outcomes. Each
worker is an LLM agent on the offline scripted model whose one turn has ``delay: 0.05`` (a
simulated 50 ms model call on the worker's thread). The workers' concurrency limit is 100
(``per_agent=100``; the global limit is 101 so the parent does not take a worker's slot), so
the 900 others wait in the FIFO queue. Ideal makespan: 1,000 / 100 x 50 ms = 0.5 s.

Also measured, for reference: the same shape on raw pykka (at most 100 live actors, each
sleeping 50 ms in ``on_receive``, a new one started as one ends).

Target (issue 8): makespan <= 1.1x ideal.
"""

from __future__ import annotations

import argparse
import threading
import time
from typing import Any

import pykka

from _common import emit, median, parse_args, quiet_logs, ratio, rounded, settle
from subagents.behaviour.function import AgentContext
from subagents.definitions.spec import AgentSpec
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime
from subagents.supervision.limits import Limits

TARGET = 1.1


class _Sleeper(pykka.ThreadingActor):
    def __init__(self, delay: float, slots: threading.Semaphore, done: list[int]) -> None:
        super().__init__()
        self.delay, self.slots, self.done = delay, slots, done

    def on_receive(self, message: Any) -> None:
        time.sleep(self.delay)
        self.done.append(message)
        self.slots.release()
        self.stop()


def raw(children: int, limit: int, delay: float) -> float:
    slots = threading.Semaphore(limit)
    done: list[int] = []
    start = time.perf_counter()
    for i in range(children):
        slots.acquire()
        _Sleeper.start(delay, slots, done).tell(i)
    for _ in range(limit):
        slots.acquire()
    elapsed = time.perf_counter() - start
    if len(done) != children:
        raise RuntimeError(f"raw: {len(done)} of {children} children finished")
    return elapsed


def runtime(children: int, limit: int, delay: float) -> float:
    marks: dict[str, float] = {}

    async def parent(ctx: AgentContext) -> str:
        marks["start"] = time.perf_counter()
        n = int(ctx.task)
        outcomes = await ctx.gather(*[ctx.spawn("worker", f"part {i}") for i in range(n)])
        marks["end"] = time.perf_counter()
        return str(sum(1 for o in outcomes if o.status == "completed"))

    worker = AgentSpec(name="worker", description="One 50 ms model call.", tools=())
    model = ScriptedModel({"worker": [{"text": "done", "delay": delay}]})
    limits = Limits(
        max_concurrency=limit + 1,
        per_agent=limit,
        max_children=children,
        queue_bound=children + 10,
        timeout_s=120.0,
    )
    agents: dict[str, Any] = {"parent": parent, "worker": worker}
    with Runtime(agents, model=model, limits=limits) as rt:
        outcome = rt.run("parent", str(children), wait=120)
    if outcome.result != str(children):
        raise RuntimeError(f"runtime: expected {children} completed children, got {outcome!r}")
    return marks["end"] - marks["start"]


def _extra(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--children", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=None, help="trials (median)")


def main() -> None:
    args = parse_args(__doc__ or "", _extra)
    quiet_logs()
    children = args.children or (100 if args.quick else 1000)
    limit, delay = 100, 0.05
    if args.quick:
        limit, delay = 20, 0.01
    repeats = args.repeats or (1 if args.quick else 3)
    ideal = children / limit * delay
    raws, runs = [], []
    for _ in range(repeats):
        raws.append(raw(children, limit, delay))
        settle()
        runs.append(runtime(children, limit, delay))
        settle()
    makespan = median(runs)
    r = ratio(makespan, ideal)
    emit(
        "fanout",
        {
            "figures": {
                "makespan_s": rounded(makespan),
                "makespan_trials_s": [rounded(x) for x in runs],
                "ideal_s": rounded(ideal),
                "raw_pykka_s": rounded(median(raws)),
                "ratio_to_raw": ratio(makespan, median(raws)),
            },
            "baseline": "ideal makespan children / limit x delay; raw pykka reference, same run",
            "target": "makespan <= 1.1x ideal",
            "ratio": r,
            "pass": r <= TARGET,
            "sizes": {"children": children, "limit": limit, "delay_s": delay, "repeats": repeats},
            "seconds": rounded(time.perf_counter() - START, 2),
        },
    )


START = time.perf_counter()

if __name__ == "__main__":
    main()
