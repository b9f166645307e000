"""deadlines: how late timeouts fire, and how long stopping a tree of 100 runs takes.

Lateness: n runs wait for mail that never comes, all live at once, each with its own timeout.
Each times out through the timer service -> supervisor; lateness = the ``timed_out`` event's
timestamp - (the run's ``started_at`` + its timeout). Two cases:
- ``steady``: timeouts spread over 1.0-1.5 s, so every run is started (and waiting) before the
  first fires: the precision of the timer path with n live runs. Target (issue 8): p99 <= 10 ms.
- ``under_spawn_load``: timeouts spread over 50-500 ms, so they fire while the rest are still
  being spawned (a new thread, a record and events per run): how late deadlines get when the
  process is busy starting runs.

Stop: a tree of 100 runs (a root, 9 children, 90 grandchildren, all waiting) is stopped with
``rt.stop(root)``. Reported: the time until the stop is answered (every run marked
cancelled and recorded), until the root's outcome reaches its caller, and until every agent
thread has ended; against stopping 100 raw pykka actors (``stop(block=False)`` for each,
then waiting for each).
"""

from __future__ import annotations

import argparse
import threading
import time
from typing import Any

import pykka

from _common import emit, median, parse_args, percentile, quiet_logs, ratio, rounded, settle
from subagents.behaviour.function import AgentContext
from subagents.messages import Event, EventKind, RunStatus
from subagents.runtime import Runtime
from subagents.supervision.limits import Limits

TARGET_P99_MS = 10.0


async def sleeper(ctx: AgentContext) -> str:
    mail = await ctx.receive(timeout=600)
    return "woken" if mail is not None else "no mail"


def lateness(n: int, first: float, spread: float) -> list[float]:
    """Seconds each of ``n`` timeouts (``first`` .. ``first + spread`` s) fired late."""
    fired: dict[str, float] = {}
    all_fired = threading.Event()

    def on_event(event: Event) -> None:
        if event.kind == EventKind.TIMED_OUT:
            fired[event.run_id] = event.ts
            if len(fired) == n:
                all_fired.set()

    limits = Limits(max_concurrency=n, per_agent=n, queue_bound=n)
    with Runtime([sleeper], limits=limits) as rt:
        rt.subscribe(on_event)
        ids = [rt.spawn("sleeper", str(i), timeout=first + spread * i / n).run_id for i in range(n)]
        if not all_fired.wait(60):
            raise RuntimeError(f"only {len(fired)} of {n} timeouts fired in 60 s")
        late = []
        for run_id in ids:
            record = rt.get(run_id)
            if record is None or record.started_at is None or record.status != RunStatus.TIMED_OUT:
                raise RuntimeError(f"run {run_id} did not time out: {record!r}")
            late.append(fired[run_id] - (record.started_at + record.deadline_s))
    return late


def _agent_threads() -> int:
    return sum(1 for t in threading.enumerate() if t.name.startswith("AgentActor"))


def stop_tree(fanout: tuple[int, int] = (9, 10)) -> dict[str, float]:
    """Seconds to stop a waiting tree of 1 + a + a*b runs."""
    a, b = fanout
    size = 1 + a + a * b

    async def leaf(ctx: AgentContext) -> str:
        return await sleeper(ctx)

    async def mid(ctx: AgentContext) -> str:
        await ctx.gather(*[ctx.spawn("leaf", f"{ctx.task}.{i}") for i in range(b)])
        return "done"

    async def root(ctx: AgentContext) -> str:
        await ctx.gather(*[ctx.spawn("mid", str(i)) for i in range(a)])
        return "done"

    waiting: set[str] = set()
    all_waiting = threading.Event()

    def on_event(event: Event) -> None:
        if event.kind == EventKind.WAITING:
            waiting.add(event.run_id)
            if len(waiting) == size:
                all_waiting.set()

    limits = Limits(max_concurrency=size, per_agent=size, max_children=size, queue_bound=size)
    threads_before = _agent_threads()
    with Runtime({"root": root, "mid": mid, "leaf": leaf}, limits=limits) as rt:
        rt.subscribe(on_event)
        handle = rt.spawn("root", "tree")
        if not all_waiting.wait(30):
            raise RuntimeError(f"only {len(waiting)} of {size} runs waiting after 30 s")
        start = time.perf_counter()
        stopped = rt.stop(handle.run_id)
        answered = time.perf_counter() - start
        outcome = handle.result(timeout=30)
        delivered = time.perf_counter() - start
        while _agent_threads() > threads_before and time.perf_counter() - start < 30:
            time.sleep(0.0005)  # a benchmark may poll; nothing tells us when a thread has ended
        joined = time.perf_counter() - start
    if len(stopped) != size or outcome.status != RunStatus.CANCELLED:
        raise RuntimeError(f"stopped {len(stopped)} of {size}; root ended {outcome.status}")
    return {"answered": answered, "delivered": delivered, "threads_ended": joined}


class _Idle(pykka.ThreadingActor):
    def on_receive(self, message: Any) -> Any:
        return message


def raw_stop(size: int = 100) -> float:
    refs = [_Idle.start() for _ in range(size)]
    refs[-1].ask("ready")
    start = time.perf_counter()
    futures = [ref.stop(block=False) for ref in refs]
    for future in futures:
        future.get(timeout=30)
    return time.perf_counter() - start


def _extra(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--n", type=int, default=None, help="timeouts measured")
    parser.add_argument("--trees", type=int, default=None, help="trees stopped (median)")


def main() -> None:
    args = parse_args(__doc__ or "", _extra)
    quiet_logs()
    n = args.n or (50 if args.quick else 1000)
    trees = args.trees or (1 if args.quick else 5)
    late = lateness(n, 0.3, 0.1) if args.quick else lateness(n, 1.0, 0.5)
    settle()
    loaded = lateness(n, 0.05, 0.45)
    settle()
    stops = []
    for _ in range(trees):
        stops.append(stop_tree())
        settle()
    raws = [raw_stop() for _ in range(trees)]
    p50, p99 = percentile(late, 50) * 1e3, percentile(late, 99) * 1e3
    stop_figures = {f"{key}_ms": rounded(median([s[key] for s in stops]) * 1e3) for key in stops[0]}
    raw_ms = median(raws) * 1e3
    emit(
        "deadlines",
        {
            "figures": {
                "lateness_p50_ms": rounded(p50),
                "lateness_p99_ms": rounded(p99),
                "lateness_max_ms": rounded(max(late) * 1e3),
                "early": sum(1 for x in late + loaded if x < 0),
                "under_spawn_load": {
                    "lateness_p50_ms": rounded(percentile(loaded, 50) * 1e3),
                    "lateness_p99_ms": rounded(percentile(loaded, 99) * 1e3),
                    "lateness_max_ms": rounded(max(loaded) * 1e3),
                },
                "stop_tree_100": stop_figures,
                "raw_stop_100_actors_ms": rounded(raw_ms),
                "stop_ratio_threads_ended_to_raw": ratio(stop_figures["threads_ended_ms"], raw_ms),
            },
            "baseline": "the deadline itself (lateness); raw pykka stop of 100 actors, same run",
            "target": "lateness p99 <= 10 ms (steady)",
            "ratio": rounded(p99 / TARGET_P99_MS),
            "pass": p99 <= TARGET_P99_MS,
            "sizes": {"timeouts": n, "tree_runs": 100, "trees": trees},
            "seconds": rounded(time.perf_counter() - START, 2),
        },
    )


START = time.perf_counter()

if __name__ == "__main__":
    main()
