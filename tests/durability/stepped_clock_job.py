"""A runtime started on a store (restore=True, the default) in a process whose wall clock
is stepped by SHIFT seconds, as NTP, a person or a VM's resume sets it: ``time.time`` moved,
the boot clock (``CLOCK_BOOTTIME``) not, as a real step leaves it. For test_lease_clock.

Usage: stepped_clock_job.py DB GATE SHIFT (DB: a SQLite file or a postgresql:// URL). The
runs it takes up are test_fencing's gated ones, with GATE (a file the test has made: they
end at once). Prints one JSON line: what its restore resumed and left elsewhere, and how
each run it resumed ended.
"""

from __future__ import annotations

import sys
import time

_wall = time.time
_shift = float(sys.argv[3])
time.time = lambda: _wall() + _shift  # the step (before anything reads the clock)

from pathlib import Path  # noqa: E402

import msgspec  # noqa: E402
from fence_job import gated_agent  # noqa: E402

from subagents import Runtime, ScriptedModel, SQLiteStore  # noqa: E402
from subagents.logs import configure  # noqa: E402
from subagents.store.base import RunStore  # noqa: E402
from subagents.store.opening import open_location  # noqa: E402

WAIT_S = 120.0


def main(db: str, gate: str) -> None:
    configure(level="warning", stream=sys.stderr)
    store: RunStore = (
        open_location(db)
        if db.startswith("postgresql://")
        else SQLiteStore(db, busy_timeout=WAIT_S)
    )
    with Runtime([gated_agent(Path(gate))], model=ScriptedModel(), store=store, lease_s=30) as rt:
        report = rt.restore_report
        ended = {r: str(rt.attach(r).result(timeout=WAIT_S).status) for r in report.resumed}
    store.close()
    said = {"resumed": report.resumed, "elsewhere": report.elsewhere, "ended": ended}
    print(msgspec.json.encode(said).decode(), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
