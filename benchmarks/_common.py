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


def emit(name: str, result: dict[str, Any]) -> None:
    """Print the one JSON object of this benchmark."""
    payload = {"benchmark": name, **result, "machine": machine()}
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
