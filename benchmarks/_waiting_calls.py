"""_waiting_calls: the work per waiting run, counted in calls, of ``spawn_many`` and of one
``spawn`` each: the load-free figure of ``scale.py``'s two start rows.

The workload is ``scale.py``'s: n root runs of a function agent that ``await
ctx.receive(...)``, every limit raised (nobody queues; ``--default-limits``: the default
``Limits``, every run past the first five queued and parked), a MemoryStore. A profile hook
on every thread counts the Python function calls and builtin calls made on each role's
threads (``spawn.py``'s ``Calls`` and ``role_of``: the caller, the supervisor, the agents'
dispatcher threads, the rest) from the first counted spawn until all n runs said they wait,
after a warm-up of ``--warm`` runs (their start not counted). The counted runs are started
with ``Runtime.spawn_many`` in batches of ``--batch``, or with one ``Runtime.spawn`` each.

Why counted, not timed: on a loaded machine CPU timings are noise, calls are not (the hook
slows what it counts, so this is no timing either). Why both paths: the one-``spawn`` path is
the anchor of the ``spawn_many`` row (issue 26: ``spawn_many`` should do well below one
``spawn`` each). Told spawns are grouped at the supervisor too (``actors/spawn_group.py``:
the root spawns queued behind one are admitted with it, as one ``SpawnMany``), so what the
two paths share is most of it; ``many_over_one`` is the ratio of all calls per run.

Each path runs in its own fresh interpreter, ``--rounds`` times, alternated (many, one,
many, one, ...); the figures are per round, and their medians. A counting tool run by hand,
as ``profile_hot_paths.py`` is (hence the underscore: not one of ``run_all.py``'s rows).

    .venv/bin/python benchmarks/_waiting_calls.py --n 20000 --rounds 2
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
from typing import Any

from _common import emit, parse_args, quiet_logs, ratio, run_side
from spawn import Calls

DEFAULT_N = 20_000
STALL_S = 600.0  # no run came to wait for this long: stuck (a hang guard, not a timing)


def counted(n: int, spawn: str, batch: int, warm: int, default_limits: bool) -> dict[str, Any]:
    """Calls per waiting run by role, of ``n`` runs started by ``spawn`` ("many"/"one")."""
    from subagents.behaviour.function import AgentContext
    from subagents.messages import Event, EventKind
    from subagents.runtime import Runtime
    from subagents.supervision.limits import Limits

    async def idle(ctx: AgentContext) -> str:
        mail = await ctx.receive(timeout=3000)
        return "mail" if mail is not None else "no mail"

    waiting = [0]
    said = threading.Condition()

    def on_event(event: Event) -> None:
        if event.kind == EventKind.WAITING:
            with said:
                waiting[0] += 1
                said.notify_all()

    def wait_for(count: int) -> None:
        with said:
            if not said.wait_for(lambda: waiting[0] >= count, STALL_S):
                raise RuntimeError(f"only {waiting[0]:,} of {count:,} runs came to wait")

    def start(first: int, count: int) -> None:
        if spawn == "one":
            for i in range(first, first + count):
                rt.spawn("idle", str(i))
            return
        for at in range(first, first + count, batch):
            jobs = [("idle", str(i)) for i in range(at, min(first + count, at + batch))]
            for item in rt.spawn_many(jobs):
                if isinstance(item, Exception):
                    raise item

    most = n + warm
    limits = (
        Limits(timeout_s=3000.0, max_timeout_s=3000.0)
        if default_limits
        else Limits(
            max_concurrency=most,
            per_agent=most,
            queue_bound=most,
            timeout_s=3000.0,
            max_timeout_s=3000.0,
        )
    )
    calls = Calls()
    threading.setprofile(calls.hook)  # every thread started from now on counts
    sys.setprofile(calls.hook)
    try:
        rt = Runtime([idle], limits=limits, agent_threads="shared")
        try:
            rt.subscribe(on_event)
            start(0, warm)
            wait_for(warm)
            calls.counting = True
            start(warm, n)
            wait_for(most)
            calls.counting = False
        finally:
            calls.counting = False
            rt.close(timeout=900)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]  # (None: unset, as documented)
    out: dict[str, Any] = {role: round(c / n, 1) for role, c in sorted(calls.by_role.items())}
    out["all"] = round(sum(calls.by_role.values()) / n, 1)
    return out


def _extra(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--n", type=int, default=None, help=f"runs counted ({DEFAULT_N:,})")
    parser.add_argument("--batch", type=int, default=1000, help="runs per spawn_many call")
    parser.add_argument("--warm", type=int, default=1000, help="runs started first, uncounted")
    parser.add_argument("--rounds", type=int, default=1, help="fresh processes per path")
    parser.add_argument(
        "--default-limits", action="store_true", help="the default Limits (runs queue, park)"
    )
    parser.add_argument("--side", choices=("many", "one"), default=None, help=argparse.SUPPRESS)


def fold_medians(rounds: list[dict[str, float]]) -> dict[str, float]:
    """Each role's median over the rounds; a round that lacks a role (no call of it in that
    round: "other" at one call in a thousand) counts 0 for it, rather than failing the fold
    (it did: ``KeyError: 'other'`` when the first round lacked it, a flaky smoke test)."""
    roles = sorted({role for r in rounds for role in r})
    return {role: statistics.median(r.get(role, 0) for r in rounds) for role in roles}


def main() -> None:
    args = parse_args(__doc__ or "", _extra)
    quiet_logs()
    n = args.n or (200 if args.quick else DEFAULT_N)
    warm = min(args.warm, 50) if args.quick else args.warm
    batch = max(1, args.batch)
    if args.side is not None:
        emit(
            "waiting-calls-side",
            {"calls_per_run": counted(n, args.side, batch, warm, args.default_limits)},
        )
        return
    shape = ["--n", str(n), "--batch", str(batch), "--warm", str(warm)]
    if args.default_limits:
        shape.append("--default-limits")
    rounds: dict[str, list[dict[str, Any]]] = {"many": [], "one": []}
    for _ in range(max(1, args.rounds)):
        for path in ("many", "one"):  # alternated: a drift of the machine hits both
            side = run_side("_waiting_calls.py", "--side", path, *shape)
            rounds[path].append(side["calls_per_run"])
    medians = {path: fold_medians(rs) for path, rs in rounds.items()}
    emit(
        "waiting-calls",
        {
            "n": n,
            "batch": batch,
            "limits": "default" if args.default_limits else "raised to n",
            "rounds": rounds,
            "median": medians,
            "many_over_one": ratio(medians["many"]["all"], medians["one"]["all"]),
        },
    )


if __name__ == "__main__":
    main()
