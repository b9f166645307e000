"""A multi-agent job on the offline model with a SQLite or PostgreSQL store, for the crash
tests.

Usage: crash_job.py DB OUT (DB: a file's path, or a postgresql:// URL). Starts the job,
or, when the store already holds it, takes it up (restore + attach) and waits for its
outcome; writes {"status", "result"} to OUT as JSON.
"""

from __future__ import annotations

import sys
from pathlib import Path

from job_kit import say, spawn_or_attach, write_outcome

from subagents.runtime import Runtime
from subagents.store.locations import store_location
from subagents.store.opening import open_location

TEAM = Path(__file__).with_name("team")
TASK = "the durability question"


def main(db: str, out: str) -> int:
    store = open_location(store_location(db))
    with Runtime(agent_dirs=[TEAM], store=store, command_poll_s=0) as rt:
        handle = spawn_or_attach(rt, store, "lead", TASK)
        say("ready")  # the crash test times its kill from here
        outcome = handle.result(timeout=60)
    store.close()
    write_outcome(out, outcome)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
