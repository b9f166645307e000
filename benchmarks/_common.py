"""What every benchmark shares: the command line, the machine description, statistics, output.

Each benchmark prints exactly one JSON object on stdout (msgspec-encoded) so that
``run_all.py`` and the smoke test can read it; everything else (logs) goes to stderr.
``--quick`` shrinks every size so the script proves it works in a second or two; its figures
are not meaningful.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from importlib import metadata
from typing import Any

import msgspec

RAY_ENV = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0", "RAY_worker_niceness": "0"}
"""The environment of the Ray benchmarks (cluster.py, ray_costs.py): no token auth, no usage
stats. ``RAY_worker_niceness``: Ray runs its workers (our node hosts) at nice 15 by default; on a
machine shared with other work they are starved (the fan-out was 2.5x slower here)."""


def parse_args(
    description: str, extra: Callable[[argparse.ArgumentParser], None] | None = None
) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--quick", action="store_true", help="tiny sizes: checks the script works, not speed"
    )
    if extra is not None:
        extra(parser)
    return parser.parse_args()


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def machine() -> dict[str, Any]:
    """Where the figures were taken: they only compare within one run on one machine."""
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "pykka": _version("pykka"),
        "subagents": _version("subagents"),
        "cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)),
        "platform": platform.platform(),
    }


def percentile(values: Sequence[float], pct: float) -> float:
    """The ``pct`` percentile (nearest rank), 0 for an empty sequence."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(pct / 100.0 * len(ordered) + 0.5) - 1))
    return ordered[rank]


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else 0.0


def vm_rss_kib() -> int:
    """Resident memory of this process (VmRSS of /proc/self/status), in KiB."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("/proc/self/status has no VmRSS line")


def settle() -> None:
    """Collect garbage and let finished threads go, so one measurement does not tax the next."""
    gc.collect()
    time.sleep(0.05)


def quiet_logs() -> None:
    """Runtime warnings go to stderr; the JSON on stdout stays alone."""
    from subagents.logs import configure

    configure(level="error", stream=sys.stderr)


_JSON_OUT: int | None = None
"""Where ``emit`` writes once ``stdout_to_stderr`` moved file descriptor 1 away."""


def stdout_to_stderr() -> None:
    """From now on, whatever this process or its children write to stdout goes to stderr,
    and only ``emit`` writes to the real stdout.

    Why at the file descriptor level: Ray (its ``Cluster``, ``ray.init``) and the processes it
    starts print to file descriptor 1 directly, not through ``sys.stdout``; a benchmark's
    stdout must hold its one JSON object and nothing else (``run_all`` parses it)."""
    global _JSON_OUT
    if _JSON_OUT is not None:
        return
    sys.stdout.flush()
    _JSON_OUT = os.dup(1)
    os.dup2(2, 1)  # fd 1 (inherited by every child process) is stderr now
    sys.stdout = sys.stderr


LOADED_ABOVE = 1.5
"""A figure taken while the 1-minute load average was above this is marked ``loaded``: on this
2-vCPU machine a benchmark alone (one busy thread) reads ~1, so above 1.5 something else was
running and competing for the second core. Figures of a loaded round are rough (issue 26)."""


def load_average() -> float:
    """The 1-minute load average (``/proc/loadavg``), or -1 where there is none."""
    try:
        with open("/proc/loadavg", encoding="ascii") as handle:
            return float(handle.read().split()[0])
    except (OSError, ValueError, IndexError):
        return -1.0


def load_record(start: float, end: float) -> dict[str, Any]:
    """The load a figure was taken at: the 1-minute average when it started and when it ended,
    the higher of the two, and whether that was above ``LOADED_ABOVE``."""
    top = max(start, end)
    return {"start": start, "end": end, "max": top, "loaded": top > LOADED_ABOVE}


class LoadWindow:
    """The load average over one figure: ``window = LoadWindow()`` before it,
    ``window.record()`` after (each figure says the load it was taken at)."""

    def __init__(self) -> None:
        self.start = load_average()

    def record(self) -> dict[str, Any]:
        return load_record(self.start, load_average())


PROCESS_LOAD = LoadWindow()
"""The load when this benchmark's process started; ``emit`` closes it as the script's load."""


def emit(name: str, result: dict[str, Any], load: dict[str, Any] | None = None) -> None:
    """Print the one JSON object of this benchmark, with the load average it was taken at
    (``load``: at the start and at the end of the process, unless the script says better, as
    ``scale.py`` does from the loads its sides were started at; figures taken in parts may
    carry their own ``load`` too)."""
    taken = load if load is not None else PROCESS_LOAD.record()
    payload = {"benchmark": name, **result, "load": taken, "machine": machine()}
    text = msgspec.json.format(msgspec.json.encode(payload)).decode() + "\n"
    if _JSON_OUT is not None:
        os.write(_JSON_OUT, text.encode())
        return
    sys.stdout.write(text)
    sys.stdout.flush()


def ratio(value: float, baseline: float) -> float:
    """``value / baseline``, rounded; every ratio the benchmarks print is "ours / theirs"."""
    return round(value / baseline, 4) if baseline else float("inf")


def autogen() -> Any:
    """The autogen-core side (``_autogen_peer``), or None when autogen-core is not installed
    (the ``bench`` extra: ``pip install -e '.[bench]'``)."""
    if _version("autogen-core") is None:
        return None
    import _autogen_peer

    return _autogen_peer


def autogen_version() -> str | None:
    return _version("autogen-core")


def cpu_s() -> float:
    """CPU seconds of this whole process (every thread), for CPU-per-item figures."""
    return time.process_time()


def mark(marks: dict[str, float], name: str) -> None:
    """Note the time and this process's CPU time under ``name`` (from any thread)."""
    marks[name] = time.perf_counter()
    marks[f"{name}_cpu"] = time.process_time()


class Rate(msgspec.Struct, frozen=True):
    """Items per second between two marks, and the process's CPU microseconds per item."""

    per_s: float
    cpu_us: float


def rate_of(marks: dict[str, float], count: int) -> Rate:
    elapsed = marks["end"] - marks["start"]
    cpu = marks["end_cpu"] - marks["start_cpu"]
    return Rate(per_s=count / elapsed, cpu_us=cpu / count * 1e6)


def run_side(script: str, *args: str, timeout: float = 900.0) -> dict[str, Any]:
    """Run ``script`` (a benchmark in this folder) in a fresh interpreter with ``args``; its one
    JSON object. Sides that must not share a process (memory: freed memory is reused) use it."""
    import subprocess
    from pathlib import Path

    command = [sys.executable, str(Path(__file__).resolve().parent / script), *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        tail = " | ".join(done.stderr.strip().splitlines()[-5:])
        raise RuntimeError(f"{script} {' '.join(args)}: exit status {done.returncode}: {tail}")
    result: dict[str, Any] = msgspec.json.decode(done.stdout)
    return result


def rounded(value: float, digits: int = 4) -> float:
    return round(value, digits)
