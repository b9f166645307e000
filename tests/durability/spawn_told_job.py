"""Half a job for test_spawn_told_crash: one run spawned and its admission waited for (it is
committed), then, once the test holds the store's write lock, three more spawns told and
taken by the supervisor into its decision, which cannot commit; the job says so and waits
to be killed (SIGKILL) there."""

from __future__ import annotations

import json
import sys
import threading

from spawn_many_job import SPECS, model

from polling import wait_until
from subagents import Runtime, SQLiteStore


def main(db: str) -> None:
    rt = Runtime(SPECS, model=model(60), store=SQLiteStore(db, busy_timeout=120))
    first = rt.spawn("worker", "a")
    first.wait_admitted()
    print(json.dumps({"admitted": first.run_id}), flush=True)
    sys.stdin.readline()  # the test holds the store's write lock now
    told = [rt.spawn("worker", task).run_id for task in "bcd"]
    supervisor = rt._hosting.supervisor
    assert supervisor is not None
    inbox = supervisor._ref.actor_inbox
    wait_until(lambda: inbox.qsize() == 0, "the supervisor deciding the spawns told")
    print(json.dumps({"told": told}), flush=True)
    threading.Event().wait()  # killed here, the decision waiting on the lock


if __name__ == "__main__":
    main(sys.argv[1])
