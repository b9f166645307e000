"""Half a job for test_spawn_told_crash: one run spawned and its admission waited for (it is
committed), then, once the test holds the store's write lock, three more spawns told; the
job says so once the supervisor is stuck on that lock, and waits to be killed (SIGKILL)
there.

Where the three spawns are when it is killed is not forced, and need not be: the supervisor
may have taken them into one decision, or the first alone (the other two queued behind its
blocked commit), or it may be stuck committing the first run's own reports (all three still
queued). In each, nothing of them can commit while the lock is held, which is what the test
checks. The job waits for the supervisor to be stuck (its thread inside the SQLite store's
transaction code, which it cannot leave while the lock is held), not for its inbox to empty:
a commit that blocks holds the inbox non-empty (a flake seen under load)."""

from __future__ import annotations

import json
import sys
import threading

from spawn_many_job import SPECS, model

from polling import wait_until
from subagents import Runtime, SQLiteStore
from subagents.store import sqlite_tx


def _inside_store_transaction(thread: threading.Thread) -> bool:
    """Whether ``thread`` is running the SQLite store's transaction code now (``BEGIN
    IMMEDIATE`` or the lock around it: where a write waits for the write lock)."""
    frame = sys._current_frames().get(thread.ident or -1)
    while frame is not None:
        if frame.f_code.co_filename == sqlite_tx.__file__:
            return True
        frame = frame.f_back
    return False


def main(db: str) -> None:
    rt = Runtime(SPECS, model=model(60), store=SQLiteStore(db, busy_timeout=120))
    first = rt.spawn("worker", "a")
    first.wait_admitted()
    print(json.dumps({"admitted": first.run_id}), flush=True)
    sys.stdin.readline()  # the test holds the store's write lock now
    told = [rt.spawn("worker", task).run_id for task in "bcd"]
    thread = rt._hosting.supervisor_thread
    assert thread is not None
    wait_until(lambda: _inside_store_transaction(thread), "the supervisor stuck on the lock")
    print(json.dumps({"told": told}), flush=True)
    threading.Event().wait()  # killed here, the supervisor waiting on the lock


if __name__ == "__main__":
    main(sys.argv[1])
