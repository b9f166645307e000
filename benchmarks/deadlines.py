"""deadlines: how late timeouts fire, and how long stopping a tree of 100 runs takes.

Lateness: n runs wait for mail that never comes, all live at once, each with its own timeout.
Each times out through the timer service -> supervisor; lateness = the ``timed_out`` event's
timestamp - (the run's ``started_at`` + its timeout). Two cases:
- ``steady``: timeouts spread over 1.0-1.5 s, so every run is started (and waiting) before the
  first fires: the precision of the timer path with n live runs. Checked: the last run's
  ``waiting`` event must come before the first ``timed_out``; when it does not (a loaded
  machine spawns slowly), the case is run again with the first deadline twice as far, up to 3
  times, and ``steady`` says whether it finally was. Target (issue 8): p99 <= 10 ms.
- ``under_spawn_load``: timeouts spread over 50-500 ms, so they fire while the rest are still
  being spawned (a record and events per run): how late deadlines get when the process is
  busy starting runs (``fired_before_all_waiting`` says how many did).

Stop: a tree of 100 runs (a root, 9 children, 90 grandchildren, all waiting) is stopped with
``rt.stop(root)``. Reported: the time until the stop is answered (every run marked cancelled
and recorded), until the root's outcome reaches its caller, and until every agent actor has
stopped (gone from pykka's ``ActorRegistry``, its loop ended); against stopping 100 raw pykka
actors (``stop(block=False)`` for each, then waiting for each: their loops have ended).

Threads, counted by name, and what they are: NOT a thread per run. A waiting run holds no
thread; the runtime runs its agents on a few dispatcher threads (``subagents-dispatch-N``,
``actors/pooled.py``) and on pooled threads (``subagents-agent-N``: replacements for a
dispatcher thread about to block, and ``agent_threads="own"``), which park for reuse rather
than end. So ``runner_threads_live`` is the threads running agents while 100 runs wait
(``runner_threads_by_kind`` splits them), and ``runner_threads_after`` how many are left
once every actor stopped (parked or idle, not a leak); a thread per run would read 100+.
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


def lateness(n: int, first: float, spread: float) -> tuple[list[float], int]:
    """Seconds each of ``n`` timeouts (``first`` .. ``first + spread`` s) fired late, and how
    many fired before the last run was waiting."""
    fired: dict[str, float] = {}
    waiting: list[float] = []
    all_fired = threading.Event()

    def on_event(event: Event) -> None:
        if event.kind == EventKind.TIMED_OUT:
            fired[event.run_id] = event.ts
            if len(fired) == n:
                all_fired.set()
        elif event.kind == EventKind.WAITING:
            waiting.append(event.ts)

    limits = Limits(max_concurrency=n, per_agent=n, queue_bound=n)
    with Runtime([sleeper], limits=limits) as rt:
        rt.subscribe(on_event)
        ids = [rt.spawn("sleeper", str(i), timeout=first + spread * i / n).run_id for i in range(n)]
        if not all_fired.wait(60 + first + spread):
            raise RuntimeError(f"only {len(fired)} of {n} timeouts fired in 60 s")
        late = []
        for run_id in ids:
            record = rt.get(run_id)
            if record is None or record.started_at is None or record.status != RunStatus.TIMED_OUT:
                raise RuntimeError(f"run {run_id} did not time out: {record!r}")
            late.append(fired[run_id] - (record.started_at + record.deadline_s))
    last_waiting = max(waiting) if len(waiting) == n else float("inf")
    return late, sum(1 for ts in fired.values() if ts < last_waiting)


def steady_lateness(n: int, first: float, spread: float) -> tuple[list[float], bool, float]:
    """Lateness with every run waiting before the first timeout fires; whether that held, and
    the first deadline it took."""
    for _ in range(3):
        late, early_fired = lateness(n, first, spread)
        if early_fired == 0:
            return late, True, first
        settle()
        first *= 2
    return late, False, first / 2


RUNNER_THREADS = {
    "dispatcher": "subagents-dispatch-",  # the few threads draining waiting runs' mailboxes
    "pooled": "subagents-agent-",  # replacements for a blocking dispatcher thread; "own" mode
    "pykka_default": "AgentActor",  # an actor on pykka's own thread (none expected)
}


def _runner_threads() -> dict[str, int]:
    """Threads that run agents, by kind (their names)."""
    names = [t.name for t in threading.enumerate()]
    return {
        kind: sum(1 for name in names if name.startswith(prefix))
        for kind, prefix in RUNNER_THREADS.items()
    }


def _live_actors(rt: Runtime) -> int:
    """pykka's registered actors, and the runtime's agent actors on its dispatcher (which
    pykka's ``ActorRegistry`` does not hold)."""
    dispatcher = rt._hosting.dispatcher
    return len(pykka.ActorRegistry.get_all()) + (dispatcher.live if dispatcher else 0)


def stop_tree(fanout: tuple[int, int] = (9, 10)) -> dict[str, Any]:
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
    with Runtime({"root": root, "mid": mid, "leaf": leaf}, limits=limits) as rt:
        actors_before = _live_actors(rt)  # the runtime's own (supervisor, registry)
        rt.subscribe(on_event)
        handle = rt.spawn("root", "tree")
        if not all_waiting.wait(30):
            raise RuntimeError(f"only {len(waiting)} of {size} runs waiting after 30 s")
        actors_live = _live_actors(rt) - actors_before
        threads_live = _runner_threads()
        start = time.perf_counter()
        stopped = rt.stop(handle.run_id)
        answered = time.perf_counter() - start
        outcome = handle.result(timeout=30)
        delivered = time.perf_counter() - start
        while _live_actors(rt) > actors_before and time.perf_counter() - start < 30:
            time.sleep(0.0005)  # a benchmark may poll; nothing tells us when an actor stopped
        actors_stopped = time.perf_counter() - start
        threads_after = sum(_runner_threads().values())
        actors_left = _live_actors(rt) - actors_before
    if len(stopped) != size or outcome.status != RunStatus.CANCELLED or actors_left:
        raise RuntimeError(
            f"stopped {len(stopped)} of {size}; root ended {outcome.status};"
            f" {actors_left} agent actors still live after 30 s"
        )
    return {
        "answered": answered,
        "delivered": delivered,
        "actors_stopped": actors_stopped,
        "agent_actors_live": actors_live,
        "runner_threads_live": sum(threads_live.values()),
        "runner_threads_by_kind": threads_live,
        "runner_threads_after": threads_after,
    }


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
    first, spread = (0.3, 0.1) if args.quick else (1.0, 0.5)
    late, steady, steady_first = steady_lateness(n, first, spread)
    settle()
    loaded, fired_early = lateness(n, 0.05, 0.45)
    settle()
    stops = []
    for _ in range(trees):
        stops.append(stop_tree())
        settle()
    raws = [raw_stop() for _ in range(trees)]
    p50, p99 = percentile(late, 50) * 1e3, percentile(late, 99) * 1e3
    times = ("answered", "delivered", "actors_stopped")
    stop_figures: dict[str, Any] = {
        f"{key}_ms": rounded(median([s[key] for s in stops]) * 1e3) for key in times
    }
    for key in ("agent_actors_live", "runner_threads_live", "runner_threads_after"):
        stop_figures[key] = max(s[key] for s in stops)
    most = max(stops, key=lambda s: s["runner_threads_live"])
    stop_figures["runner_threads_by_kind"] = most["runner_threads_by_kind"]
    stop_figures["threads_are"] = (
        "threads running agents (dispatcher + pooled), not a thread per run: 100 runs wait on"
        " them; after: those left parked or idle once every actor stopped"
    )
    raw_ms = median(raws) * 1e3
    emit(
        "deadlines",
        {
            "figures": {
                "lateness_p50_ms": rounded(p50),
                "lateness_p99_ms": rounded(p99),
                "lateness_max_ms": rounded(max(late) * 1e3),
                "steady": steady,
                "steady_first_deadline_s": steady_first,
                "early": sum(1 for x in late + loaded if x < 0),
                "under_spawn_load": {
                    "lateness_p50_ms": rounded(percentile(loaded, 50) * 1e3),
                    "lateness_p99_ms": rounded(percentile(loaded, 99) * 1e3),
                    "lateness_max_ms": rounded(max(loaded) * 1e3),
                    "fired_before_all_waiting": fired_early,
                },
                "stop_tree_100": stop_figures,
                "raw_stop_100_actors_ms": rounded(raw_ms),
                "stop_ratio_to_raw": ratio(stop_figures["actors_stopped_ms"], raw_ms),
            },
            "baseline": "the deadline itself (lateness); raw pykka stop of 100 actors, same run",
            "target": "lateness p99 <= 10 ms (steady)",
            "ratio": rounded(p99 / TARGET_P99_MS),
            "pass": steady and p99 <= TARGET_P99_MS,
            "sizes": {"timeouts": n, "tree_runs": 100, "trees": trees},
            "seconds": rounded(time.perf_counter() - START, 2),
        },
    )


START = time.perf_counter()

if __name__ == "__main__":
    main()
