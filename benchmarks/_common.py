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


def emit(name: str, result: dict[str, Any]) -> None:
    """Print the one JSON object of this benchmark."""
    payload = {"benchmark": name, **result, "machine": machine()}
    sys.stdout.write(msgspec.json.format(msgspec.json.encode(payload)).decode() + "\n")
    sys.stdout.flush()


def ratio(value: float, baseline: float) -> float:
    return round(value / baseline, 4) if baseline else float("inf")


def rounded(value: float, digits: int = 4) -> float:
    return round(value, digits)
