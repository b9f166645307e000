"""scale: memory, start time and close time of n live subagents waiting for mail.

Runtime: n root runs of a function agent that ``await ctx.receive(...)``: each is a live run
(status waiting) with its actor, mailbox, record, events and a pending timer. Raw: n bare
pykka ``ThreadingActor``s, started and idle (pykka's default: a thread each).

Each side runs in a fresh interpreter (``--side raw`` / ``--side runtime``, started by this
script): measured in one process, the side measured second reuses the memory the first freed
(the runtime looked 1.19x raw that way; 1.48x measured apart). Per side:

- memory per subagent: (VmRSS with all n waiting - VmRSS before the first) / n, from
  /proc/self/status (the runtime's own fixed cost is in "before": it is built first);
- start: seconds from the first spawn until all n are waiting (the runtime's ``waiting``
  events; raw: the last actor answered an ``ask``). The runtime's runs are started with
  ``Runtime.spawn_many`` in batches of ``--batch`` (default 1,000: one supervisor decision
  and one store commit per batch), or with one ``Runtime.spawn`` each (``--spawn one``: the
  per-run path, reported by ``run_all.py`` beside it); CPU seconds of the process and the
  cyclic GC's full (gen-2) passes during the start are reported with it, and its young and
  middle passes (``start_gc_younger``: count, their threads' CPU) and the process's minor
  page faults and context switches (``start_usage``: where the wall clock goes beyond the
  CPU). ``--gc-freeze``
  calls ``gc.freeze()`` after each batch as well (from 1,000 live runs the runtime paces
  the GC itself, freezing what survives each full pass: ``actors/gc_pacing.py``,
  docs/runtime.md; the full passes counted then are mostly short ones over what is new);
- close: seconds of ``Runtime.close()`` (every run cancelled, every thread joined), its
  CPU seconds and the full GC passes made during it (``close_gc_full``: their count, seconds
  and the longest; one over everything the pacing had frozen is a second or more); raw: a
  stop told to every actor, then each stop waited for.

A waiting run holds no OS thread (its actor's mailbox is drained by the runtime's few dispatcher
threads: ``actors/pooled.py``); with ``Runtime(agent_threads="own")`` it held one, and n was
bounded by the machine (``pid_max``, ``threads-max``, ``ulimit -u``, ``vm.max_map_count``;
threads of other processes count too). The runtime side first starts ``min(n, 500)`` runs,
measures the threads they hold, and when n of them would not fit in what the machine has left it
does not try (a machine out of threads fails other people's processes too): ``tried: false`` and
the reason are the result. ``--force`` tries anyway, and a run or thread that cannot start is
reported as the result, not a crash. When n was not tried, the runtime side is measured again at
10,000 (``measured_at``) so the run still gives figures.

The runs above are started with every limit raised to n (nobody queues). A user who keeps the
default ``Limits`` (10 working at once, 5 per agent) pays more: every run past the first five
queues, and once started and waiting parks to lend its slot to the next (``slots.py``). So
``spawn_many`` is also measured under the default limits, at ``--default-limits-n`` runs (default
20,000, the default queue bound; 0: not): ``figures.default_limits``, and
``default_limits_cpu_ratio``, its CPU per run over that of the limits raised at the same n (a
figure, no goal): the raised-limits row when it ran at that n, else ``default_limits_raised``,
measured at that n for it (CPU per run moves with n: the GC's passes walk the live runs).

The raw side is measured at ``--raw-n`` (default min(n, 10,000)): memory per actor does not
depend on n, and raw pykka needs a thread per actor too. The default n is the goal's, 100,000.

Goals: 100,000 live waiting subagents at <= 1.5x the memory of a raw pykka actor each (issue
17); started with one ``spawn`` each in under 10 s (the headline: the path most callers take),
with ``spawn_many`` in under 5 s, closed in under 3 s (issue 26). The anchor of each, measured
in the same run, is the raw side (its start and close at ``--raw-n`` actors); the
``spawn_many`` row's own anchor is ``least_waiting`` (``_least_waiting.py``: the least a
waiting run of this design does, the same n and batch, in the runtime side's process after
the runtime closed), beside ``decisions_alone`` (the supervisor's decisions of those runs
alone, one thread: how much of the gap is deciding, how much carrying out). The
one-``spawn`` row's floor is ``least_one_spawn`` (the same, each run told on its own,
unanswered, as ``Runtime.spawn`` tells it; in the one-``spawn`` side's process), the close
row's ``least_close`` (``_least_close.py``: a serial supervisor ending every run in one pass,
recording each end and telling each actor to stop, until the dispatcher has closed; on
``least_waiting``'s runs, in the ``spawn_many`` side's process).

The load: each side's ``load`` is the 1-minute load average read just before that side's
process starts (``load.taken``), not at its end: the raw side's 10,000 threads drive the
average up to 40-60 while it runs, and it decays over minutes, so read at a side's end (or at
the start of the side after it) it said "loaded" of a quiet machine. The runtime sides run
first and the raw side last, for the same reason; what each side's own process read at its
start and end is kept beside it (``load_in_process``). The script's own ``load`` is the
highest of the sides' (each read before its side started).
"""

from __future__ import annotations

import argparse
import gc
import resource
import threading
import time
from pathlib import Path
from typing import Any

import pykka

from _common import (
    emit,
    load_average,
    load_record,
    parse_args,
    quiet_logs,
    ratio,
    rounded,
    run_side,
    settle,
    vm_rss_kib,
)
from _least_close import least_close
from _least_waiting import decisions_alone, least_waiting

TARGET_MEMORY = 1.5
TARGET_START_ONE_S = 10.0  # one Runtime.spawn per run (the headline)
TARGET_START_S = 5.0  # spawn_many in batches
TARGET_CLOSE_S = 3.0
GOAL_N = 100_000
PILOT = 500
FALLBACK_N = 10_000  # measured instead when the requested n cannot be tried
DEFAULT_LIMITS_N = 20_000  # the default Limits' queue bound: at most this many queued
STALL_S = 30.0  # no run came to wait for this long: the start is stuck
HEADROOM = 2000  # threads left free for everyone else on the machine


def thread_capacity(cap: int | None = None) -> dict[str, Any]:
    """How many more threads this process may start, and what limits it (``cap``: at most
    that many, as if the machine allowed no more: ``--max-threads``)."""
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
    try:  # "running/total" scheduling entities of the whole machine
        limits["threads_on_machine"] = int(
            Path("/proc/loadavg").read_text().split()[3].split("/")[1]
        )
    except (OSError, ValueError, IndexError):
        limits["threads_on_machine"] = None
    in_use = limits["threads_on_machine"] or threading.active_count()
    caps = {}
    for name in ("ulimit_u", "threads_max", "pid_max"):
        if limits[name] is not None:
            caps[name] = limits[name] - in_use
    if limits["max_map_count"]:
        caps["max_map_count"] = limits["max_map_count"] // 2  # a thread stack: two mappings
    if cap is not None:
        caps["--max-threads"] = cap + HEADROOM
    if caps:
        binding = min(caps, key=lambda k: caps[k])
        limits["binding"] = binding
        limits["usable"] = max(0, caps[binding] - HEADROOM)
    else:
        limits["binding"], limits["usable"] = None, None
    return limits


# ---- raw pykka (one side) --------------------------------------------------------------------


class _Idle(pykka.ThreadingActor):
    def on_receive(self, message: Any) -> Any:
        return message


def raw_side(n: int, force: bool, cap: int | None) -> dict[str, Any]:
    capacity = thread_capacity(cap)
    if not force and capacity["usable"] is not None and n > capacity["usable"]:
        return {
            "tried": False,
            "reason": f"{n:,} raw actors need {n:,} threads; this machine has"
            f" {capacity['usable']:,} to spare ({capacity['binding']})",
            "thread_limits": capacity,
        }
    settle()
    before = vm_rss_kib()
    refs: list[pykka.ActorRef[Any]] = []
    started = time.perf_counter()
    error = None
    try:
        for _ in range(n):
            refs.append(_Idle.start())
        refs[-1].ask("ready")
    except Exception as exc:  # out of threads: the result, not a crash
        error = f"{type(exc).__name__}: {exc}"
    start_s = time.perf_counter() - started
    settle()
    after = vm_rss_kib()
    closing = time.perf_counter()
    futures = [ref.stop(block=False) for ref in refs]
    for future in futures:
        future.get(timeout=600)
    close_s = time.perf_counter() - closing
    out: dict[str, Any] = {
        "tried": True,
        "n": len(refs),
        "kib_each": rounded((after - before) / max(1, len(refs)), 2),
        "start_s": rounded(start_s, 3),
        "close_s": rounded(close_s, 3),
        "thread_limits": capacity,
    }
    if error is not None:
        out["failed"] = f"after {len(refs):,} of {n:,} actors: {error}"
    return out


# ---- the runtime (the other side) ------------------------------------------------------------


class _GcPasses:
    """The cyclic GC's passes while counting: the full (generation 2) ones, their seconds and
    the longest; the young (0) and middle (1) ones, their count and their threads' CPU (a
    pass runs on the thread that set it off; CPU, not wall: a loaded machine's waits are not
    the collector's)."""

    def __init__(self) -> None:
        self.passes = 0
        self.seconds = 0.0
        self.longest = 0.0
        self.younger = {0: [0, 0.0], 1: [0, 0.0]}
        self._at = 0.0
        self._cpu_at = 0.0
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        generation = info.get("generation")
        if phase == "start":
            self._at, self._cpu_at = time.perf_counter(), time.thread_time()
        elif generation == 2:
            self.passes += 1
            took = time.perf_counter() - self._at
            self.seconds += took
            self.longest = max(self.longest, took)
        elif generation in self.younger:
            counted = self.younger[generation]
            counted[0] += 1
            counted[1] += time.thread_time() - self._cpu_at

    def close(self) -> dict[str, Any]:
        gc.callbacks.remove(self._callback)
        seconds, longest = rounded(self.seconds, 3), rounded(self.longest, 3)
        return {"passes": self.passes, "seconds": seconds, "longest": longest}

    def young_and_middle(self) -> dict[str, Any]:
        """The young and middle passes counted: ``{"young": {"passes", "cpu_s"}, ...}``."""
        return {
            name: {"passes": self.younger[g][0], "cpu_s": rounded(self.younger[g][1], 3)}
            for name, g in (("young", 0), ("middle", 1))
        }


def _usage() -> resource.struct_rusage:
    return resource.getrusage(resource.RUSAGE_SELF)


def _usage_since(before: resource.struct_rusage) -> dict[str, int]:
    """What the process's threads did since ``before``: minor page faults (memory touched for
    the first time) and context switches (a thread that blocked; one the kernel took off a
    core): where a start's wall clock goes beyond its CPU."""
    now = _usage()
    return {
        "minor_faults": now.ru_minflt - before.ru_minflt,
        "voluntary_switches": now.ru_nvcsw - before.ru_nvcsw,
        "involuntary_switches": now.ru_nivcsw - before.ru_nivcsw,
    }


def runtime_side(
    n: int,
    force: bool,
    cap: int | None,
    spawn: str = "many",
    batch: int = 1000,
    gc_freeze: bool = False,
    default_limits: bool = False,
) -> dict[str, Any]:
    from subagents.behaviour.function import AgentContext
    from subagents.messages import Event, EventKind
    from subagents.runtime import Runtime
    from subagents.supervision.limits import Limits

    async def idle(ctx: AgentContext) -> str:
        mail = await ctx.receive(timeout=3000)
        return "mail" if mail is not None else "no mail"

    waiting = [0]
    failed: list[str] = []
    counted = threading.Condition()

    def on_event(event: Event) -> None:
        if event.kind == EventKind.WAITING:
            with counted:
                waiting[0] += 1
                counted.notify_all()
        elif event.kind in (EventKind.FAILED, EventKind.CANCELLED, EventKind.TIMED_OUT):
            with counted:
                failed.append(f"{event.kind}: {event.data.get('error', '')}")
                counted.notify_all()

    progress = {"count": 0, "at": time.monotonic()}

    def stalled(spawned: int) -> bool:
        """No run came to wait for ``STALL_S`` while some spawned ones are not waiting yet."""
        now = time.monotonic()
        if waiting[0] != progress["count"]:
            progress["count"], progress["at"] = waiting[0], now
            return False
        return spawned > waiting[0] and now - progress["at"] >= STALL_S

    def wait_for(count: int, timeout: float, stall_s: float = STALL_S) -> bool:
        """True when ``count`` are waiting; False at ``timeout``, at a run that ended, or when
        no run came to wait for ``stall_s`` (a run whose actor could not start is neither
        waiting nor ended: the runtime logs "effect failed" and the run hangs)."""
        deadline = time.monotonic() + timeout
        with counted:
            last, since = waiting[0], time.monotonic()
            while waiting[0] < count and not failed:
                now = time.monotonic()
                if now >= deadline or now - since >= stall_s:
                    return False
                counted.wait(min(1.0, deadline - now))
                if waiting[0] != last:
                    last, since = waiting[0], time.monotonic()
            return not failed

    if default_limits:  # 10 working at once, 5 per agent: every run parks to let the next in
        limits = Limits(timeout_s=3000.0, max_timeout_s=3000.0)
    else:
        limits = Limits(
            max_concurrency=n, per_agent=n, queue_bound=n, timeout_s=3000.0, max_timeout_s=3000.0
        )
    capacity = thread_capacity(cap)
    rt = Runtime([idle], limits=limits, agent_threads="shared")
    out: dict[str, Any] = {
        "tried": True,
        "thread_limits": capacity,
        "spawn": spawn,
        "gc_freeze": gc_freeze,
        "limits": "default" if default_limits else "raised to n",
    }
    if spawn == "many":
        out["batch"] = batch
    spawned = 0

    def start(first: int, end: int) -> int:
        """Start runs ``first`` to ``end`` (the number started): ``spawn_many`` in batches,
        or one ``spawn`` each; a refused run is raised, as ``spawn`` raises it."""
        if spawn == "one":
            rt.spawn("idle", str(first))
            if gc_freeze and first % batch == 0:
                gc.freeze()
            return 1
        jobs = [("idle", str(i)) for i in range(first, min(end, first + batch))]
        for item in rt.spawn_many(jobs):
            if isinstance(item, Exception):
                raise item
        if gc_freeze:  # what is alive now is not scanned again by the full passes
            gc.freeze()
        return len(jobs)

    try:
        rt.subscribe(on_event)
        settle()
        before = vm_rss_kib()
        threads_before = threading.active_count()
        pilot = min(n, PILOT, capacity["usable"] or PILOT)
        gc_passes = _GcPasses()
        usage_started = _usage()
        cpu_started = time.process_time()
        started = time.perf_counter()
        try:
            while spawned < pilot:
                spawned += start(spawned, pilot)
                if stalled(spawned):
                    raise RuntimeError(f"{spawned} spawned, {waiting[0]} waiting: stalled")
            if not wait_for(pilot, 300):
                raise RuntimeError(f"only {waiting[0]} of {pilot} waiting (stalled or 300 s)")
        except Exception as exc:  # even the pilot could not start: the result, not a crash
            out.update(n=spawned, waiting=waiting[0])
            out["failed"] = f"in the pilot of {pilot}: {type(exc).__name__}: {exc}"
            return out
        pilot_s = time.perf_counter() - started
        per_run = (threading.active_count() - threads_before) / pilot
        out["threads_per_waiting_run"] = rounded(per_run, 3)
        needed = round(per_run * n)
        if not force and capacity["usable"] is not None and needed > capacity["usable"]:
            out["tried"] = False
            out["reason"] = (
                f"{n:,} waiting runs would hold ~{needed:,} threads ({per_run:.2f} each,"
                f" measured on {pilot}); this machine has {capacity['usable']:,} to spare"
                f" ({capacity['binding']})"
            )
            return out
        resumed = time.perf_counter()
        error = None
        try:
            while spawned < n:
                spawned += start(spawned, n)
                if stalled(spawned):
                    raise RuntimeError(
                        f"{spawned:,} spawned, {waiting[0]:,} waiting, none more for"
                        f" {STALL_S:g} s; the runtime's log on stderr says why"
                    )
        except Exception as exc:  # refused, or out of threads: the result, not a crash
            error = f"{type(exc).__name__}: {exc}"
        if error is None and not wait_for(n, 900):
            error = (
                f"only {waiting[0]} of {n} runs waiting (none more for {STALL_S:g} s, or 900 s"
                " in all); the runtime's log on stderr says why"
            )
        if error is None and failed:
            error = f"{len(failed)} runs ended instead of waiting; first: {failed[0]}"
        start_s = pilot_s + time.perf_counter() - resumed
        out["start_cpu_s"] = rounded(time.process_time() - cpu_started, 3)
        out["start_usage"] = _usage_since(usage_started)
        out["start_gc_full"] = gc_passes.close()
        out["start_gc_younger"] = gc_passes.young_and_middle()
        out["threads_at_peak"] = threading.active_count()
        settle()
        after = vm_rss_kib()
        out.update(
            n=spawned,
            waiting=waiting[0],
            kib_each=rounded((after - before) / max(1, spawned), 2),
            start_s=rounded(start_s, 3),
        )
        if error is not None:
            out["failed"] = f"after {spawned:,} of {n:,} spawns: {error}"
    finally:
        close_passes = _GcPasses()
        closing, cpu_closing = time.perf_counter(), time.process_time()
        rt.close(timeout=900)
        out["close_s"] = rounded(time.perf_counter() - closing, 3)
        out["close_cpu_s"] = rounded(time.process_time() - cpu_closing, 3)
        out["close_gc_full"] = close_passes.close()
        out["threads_after_close"] = threading.active_count()
    if not default_limits and "failed" not in out and out["tried"]:
        # the floors of these rows, in this process after the runtime closed (what it left
        # for the GC collected first: a floor does not pay the runtime's garbage)
        gc.collect()
        if spawn == "one":  # told one each, unanswered: the one-spawn row's own floor
            out["least_one_spawn"] = least_waiting(out["n"], batch, one_each=True)
            return out
        least = least_waiting(out["n"], batch, close=least_close)
        out["least_close"] = least.pop("close")
        out["least_waiting"] = least
        gc.collect()
        out["decisions_alone"] = decisions_alone(out["n"], batch)
    return out


# ---- both, each in its own process -----------------------------------------------------------

LOAD_TAKEN = "before the side's process started"


def measured_side(*args: str) -> dict[str, Any]:
    """One side in its own process (``run_side``), its ``load`` read just before it started:
    what its own process reads at its end counts its own threads (the raw side's 10,000), and
    what the next side reads at its start still counts them (the 1-minute average decays over
    minutes). Its process's own reading is kept as ``load_in_process``."""
    before = load_average()
    result = run_side("scale.py", *args)
    result["load_in_process"] = result.get("load")
    result["load"] = {**load_record(before, before), "taken": LOAD_TAKEN}
    return result


def _extra(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--n", type=int, default=None, help="subagents (default 100,000)")
    parser.add_argument("--raw-n", type=int, default=None, help="raw actors (min(n, 10,000))")
    parser.add_argument("--force", action="store_true", help="try even past the thread limit")
    parser.add_argument(
        "--max-threads", type=int, default=None, help="use at most this many threads (a cap)"
    )
    parser.add_argument(
        "--fallback-n", type=int, default=FALLBACK_N, help="measured when n cannot be tried"
    )
    parser.add_argument(
        "--spawn",
        choices=("many", "one"),
        default="many",
        help="start the runs with spawn_many in batches (default) or one spawn each",
    )
    parser.add_argument(
        "--batch", type=int, default=1000, help="runs per spawn_many call (default 1,000)"
    )
    parser.add_argument(
        "--no-per-run",
        action="store_true",
        help="do not also measure the runtime with one spawn per run",
    )
    parser.add_argument(
        "--gc-freeze",
        action="store_true",
        help="gc.freeze() after each batch (an embedding program's choice, docs/runtime.md)",
    )
    parser.add_argument(
        "--default-limits-n",
        type=int,
        default=DEFAULT_LIMITS_N,
        help="also start this many with spawn_many under the default Limits (0: not)",
    )
    parser.add_argument("--default-limits", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--side", choices=("raw", "runtime"), default=None, help=argparse.SUPPRESS)


def main() -> None:
    args = parse_args(__doc__ or "", _extra)
    quiet_logs()
    n = args.n or (200 if args.quick else GOAL_N)
    if args.side == "raw":  # emit adds the side's load (its process's)
        emit("scale-side", raw_side(n, args.force, args.max_threads))
        return
    if args.side == "runtime":
        emit(
            "scale-side",
            runtime_side(
                n,
                args.force,
                args.max_threads,
                args.spawn,
                max(1, args.batch),
                args.gc_freeze,
                args.default_limits,
            ),
        )
        return
    raw_n = args.raw_n or min(n, 10_000)
    force = ["--force"] if args.force else []
    force += ["--spawn", args.spawn, "--batch", str(args.batch)]
    if args.gc_freeze:
        force.append("--gc-freeze")
    if args.max_threads is not None:
        force += ["--max-threads", str(args.max_threads)]
    # the runtime sides first, the raw side last: its 10,000 threads drive the load up
    attempt = measured_side("--side", "runtime", "--n", str(n), *force)
    ours = attempt
    if (not attempt["tried"] or "failed" in attempt) and n > args.fallback_n:
        ours = measured_side("--side", "runtime", "--n", str(args.fallback_n), *force)
    per_run = None
    if args.spawn == "many" and not args.no_per_run and ours["tried"] and "failed" not in ours:
        # the same size started with one Runtime.spawn each: the path most callers take
        per_run = measured_side(
            "--side", "runtime", "--n", str(ours["n"]), *force, "--spawn", "one"
        )
    default_limits = raised_there = None
    if args.spawn == "many" and args.default_limits_n > 0:
        # what a user who keeps the default Limits pays: every run over them waits in the
        # queue and, once started and waiting, parks to lend its slot to the next
        default_n = min(n, args.default_limits_n)
        default_limits = measured_side(
            "--side", "runtime", "--n", str(default_n), *force, "--default-limits"
        )
        default_limits.pop("thread_limits", None)
        if (ours.get("n") != default_n or "failed" in ours) and default_limits.get("tried"):
            # compared with the limits raised at the SAME n: CPU per run moves with n (the
            # GC's passes walk the live runs; 70.8 us at 20,000, 73.8 at 100,000 measured),
            # so another n's row (100,000, or the fallback 10,000) is not like for like
            raised_there = measured_side("--side", "runtime", "--n", str(default_n), *force)
            raised_there.pop("thread_limits", None)
    raw = measured_side("--side", "raw", "--n", str(raw_n), *force)
    for side in (raw, attempt, ours, per_run or {}, default_limits or {}, raised_there or {}):
        side.pop("benchmark", None)
        side.pop("machine", None)
    if per_run is not None:
        per_run.pop("thread_limits", None)
    measured = ours["tried"] and raw["tried"] and "failed" not in ours
    figures: dict[str, Any] = {"runtime": ours, "raw": raw, "measured_at": ours.get("n")}
    if ours is not attempt:
        figures["attempt"] = attempt
    if per_run is not None:
        figures["per_run_spawn"] = per_run
    if default_limits is not None:
        figures["default_limits"] = default_limits
        baseline = ours if raised_there is None else raised_there
        if raised_there is not None:
            figures["default_limits_raised"] = raised_there
        if baseline.get("n") == default_limits.get("n") and all(
            "start_cpu_s" in side and "failed" not in side for side in (default_limits, baseline)
        ):
            figures["default_limits_cpu_ratio"] = ratio(  # CPU per run, default / raised
                default_limits["start_cpu_s"] / default_limits["n"],
                baseline["start_cpu_s"] / baseline["n"],
            )
    goals: dict[str, Any] = {}
    if measured:
        r = ratio(ours["kib_each"], raw["kib_each"])
        figures["memory_ratio"] = r
        anchor = f"raw pykka, {raw['n']:,} actors, own process, same run"
        goals = {
            "memory": {
                "ratio": r,
                "anchor": f"{anchor}: {raw['kib_each']} KiB each",
                "target": TARGET_MEMORY,
                "pass": r <= TARGET_MEMORY,
            },
            "start": {
                "seconds": ours["start_s"],
                "anchor": f"{anchor}: started in {raw['start_s']} s",
                "target": TARGET_START_S,
                "pass": ours["start_s"] < TARGET_START_S,
                "least_waiting": ours.get("least_waiting"),
                "decisions_alone": ours.get("decisions_alone"),
            },
            "close": {
                "seconds": ours["close_s"],
                "anchor": f"{anchor}: stopped in {raw['close_s']} s",
                "target": TARGET_CLOSE_S,
                "pass": ours["close_s"] < TARGET_CLOSE_S,
                "least_close": ours.get("least_close"),
            },
        }
        if per_run is not None and "start_s" in per_run and "failed" not in per_run:
            goals["start_one_spawn"] = {
                "seconds": per_run["start_s"],
                "anchor": f"{anchor}: started in {raw['start_s']} s",
                "target": TARGET_START_ONE_S,
                "pass": per_run["start_s"] < TARGET_START_ONE_S,
                "least_one_spawn": per_run.get("least_one_spawn"),
            }
    at_goal_size = n >= GOAL_N  # and when it was not tried, the goal is missed
    emit(
        "scale",
        {
            "figures": figures,
            "goals": goals,
            "measured": measured,
            "baseline": "raw pykka: an idle ThreadingActor, in its own process",
            "target": (
                f"{GOAL_N:,} waiting: memory <= {TARGET_MEMORY}x raw each, started with one"
                f" spawn each < {TARGET_START_ONE_S:g} s, with spawn_many < {TARGET_START_S:g}"
                f" s, closed < {TARGET_CLOSE_S:g} s"
            ),
            "ratio": figures.get("memory_ratio"),
            "pass": (measured and ours is attempt and all(g["pass"] for g in goals.values()))
            if at_goal_size
            else None,  # the goal is at 100,000: a smaller run informs, it does not pass
            "sizes": {"requested": n, "raw": raw_n, "goal": GOAL_N, "tried": attempt["tried"]},
            "seconds": rounded(time.perf_counter() - START, 2),
        },
        load=highest_load(
            [raw, attempt, ours, per_run or {}, default_limits or {}, raised_there or {}]
        ),
    )


def highest_load(sides: list[dict[str, Any]]) -> dict[str, Any]:
    """The script's load: the highest of its sides' (each read before its side started)."""
    top = max((side["load"]["max"] for side in sides if "load" in side), default=-1.0)
    return {**load_record(top, top), "taken": f"the highest of the sides', each {LOAD_TAKEN}"}


START = time.perf_counter()

if __name__ == "__main__":
    main()
