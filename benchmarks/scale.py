"""scale: resident memory per live subagent waiting for mail, against a raw pykka actor.

Runtime: n root runs of a function agent that ``await ctx.receive(...)``: each is a live run
(status waiting) with its own actor, mailbox, record, events and a pending timer. Measured once
every run has reported ``waiting`` (the runtime's own event). Raw: n bare ``ThreadingActor``s
started and idle. Per subagent = (VmRSS after - VmRSS before) / n, from /proc/self/status.

Each pykka actor is a thread, so n is bounded by the machine's thread limits
(``ulimit -u``, ``/proc/sys/kernel/threads-max``, ``vm.max_map_count``): the script reads
them and measures the largest n <= the requested n that they allow, and says so.

Target (issue 8): runtime memory per subagent <= 2x raw.
"""

from __future__ import annotations

import argparse
import resource
import threading
import time
from pathlib import Path
from typing import Any

import pykka

from _common import emit, parse_args, quiet_logs, ratio, rounded, settle, vm_rss_kib
from subagents.behaviour.function import AgentContext
from subagents.messages import Event, EventKind
from subagents.runtime import Runtime
from subagents.supervision.limits import Limits

TARGET = 2.0
HEADROOM = 200  # threads kept free for the interpreter, the runtime's own threads, the baseline


def thread_capacity() -> dict[str, Any]:
    """How many more threads this process may start, and why."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NPROC)
    limits: dict[str, Any] = {"ulimit_u": None if soft == resource.RLIM_INFINITY else soft}
    for name, path in (
        ("threads_max", "/proc/sys/kernel/threads-max"),
        ("max_map_count", "/proc/sys/vm/max_map_count"),
        ("pid_max", "/proc/sys/kernel/pid_max"),
    ):
        try:
            limits[name] = int(Path(path).read_text().split()[0])
        except (OSError, ValueError, IndexError):
            limits[name] = None
    caps = [v for k, v in limits.items() if v is not None and k != "max_map_count"]
    if limits["max_map_count"]:
        caps.append(limits["max_map_count"] // 2)  # a thread stack costs two mappings
    limits["usable"] = max(0, min(caps) - threading.active_count() - HEADROOM) if caps else None
    return limits


class _Idle(pykka.ThreadingActor):
    def on_receive(self, message: Any) -> Any:
        return message


def raw(n: int) -> float:
    settle()
    before = vm_rss_kib()
    refs = [_Idle.start() for _ in range(n)]
    refs[-1].ask("ready")
    settle()
    after = vm_rss_kib()
    for ref in refs:
        ref.stop(block=False)
    for ref in refs:
        ref.stop(block=True)
    return (after - before) / n


def runtime(n: int) -> tuple[float, float]:
    """KiB per waiting subagent, and the seconds it took to have them all waiting."""

    async def idle(ctx: AgentContext) -> str:
        mail = await ctx.receive(timeout=600)
        return "mail" if mail is not None else "no mail"

    waiting = threading.Event()
    count = [0]

    def on_event(event: Event) -> None:
        if event.kind == EventKind.WAITING:
            count[0] += 1
            if count[0] == n:
                waiting.set()

    settle()
    before = vm_rss_kib()
    limits = Limits(
        max_concurrency=n, per_agent=n, queue_bound=n, timeout_s=900.0, max_timeout_s=900.0
    )
    with Runtime([idle], limits=limits) as rt:
        rt.subscribe(on_event)
        start = time.perf_counter()
        for i in range(n):
            rt.spawn("idle", str(i))
        if not waiting.wait(300):
            raise RuntimeError(f"only {count[0]} of {n} runs reached waiting in 300 s")
        ready = time.perf_counter() - start
        settle()
        after = vm_rss_kib()
        rt.close(timeout=120)
    return (after - before) / n, ready


def _extra(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--n", type=int, default=None, help="subagents (default 10,000)")


def main() -> None:
    args = parse_args(__doc__ or "", _extra)
    quiet_logs()
    requested = args.n or (200 if args.quick else 10_000)
    capacity = thread_capacity()
    n = requested if capacity["usable"] is None else min(requested, capacity["usable"])
    raw_kib = raw(n)
    run_kib, ready_s = runtime(n)
    r = ratio(run_kib, raw_kib)
    emit(
        "scale",
        {
            "figures": {
                "runtime_kib_per_subagent": rounded(run_kib, 2),
                "raw_kib_per_actor": rounded(raw_kib, 2),
                "seconds_to_all_waiting": rounded(ready_s, 3),
            },
            "baseline": "raw pykka: an idle ThreadingActor, same run",
            "target": "memory per waiting subagent <= 2x raw",
            "ratio": r,
            "pass": r <= TARGET,
            "sizes": {
                "requested": requested,
                "measured": n,
                "capped_by_machine": n < requested,
                "thread_limits": capacity,
            },
            "seconds": rounded(time.perf_counter() - START, 2),
        },
    )


START = time.perf_counter()

if __name__ == "__main__":
    main()
