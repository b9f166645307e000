"""Other processes read and post commands while this one writes (the `subagents ps` case);
commands are taken exactly once by several processes, on SQLite and on PostgreSQL."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from storekit import SRC, event, run

from polling import wait_until
from subagents.store.locations import store_location
from subagents.store.migrations import SCHEMA_VERSION
from subagents.store.opening import open_location
from subagents.store.sqlite import SQLiteStore

BATCHES = 30
PER_BATCH = 10

QUIET = """
import sys
from subagents.logs import configure
configure(level="warning", stream=sys.stderr)
"""

READER = (
    QUIET
    + """
import json, sys, time
from subagents.store.sqlite import SQLiteStore
path, expected = sys.argv[1], int(sys.argv[2])
store = SQLiteStore(path)
print("ready", flush=True)
counts, posted = [], []
deadline = time.monotonic() + 100  # a hang guard: it ends when the parent is done
while time.monotonic() < deadline:
    n = len(store.list_runs())
    counts.append(n)
    posted.append(store.post_command("send", f"r{len(posted)}", f"note {len(posted)}"))
    if n >= expected:
        break
print(json.dumps({"counts": counts, "posted": posted}), flush=True)
"""
)

TAKER = (
    QUIET
    + """
import json, sys, time
from subagents.store.locations import store_location
from subagents.store.opening import open_location
store = open_location(store_location(sys.argv[1]))
print("ready", flush=True)
taken = []
deadline = time.monotonic() + 100  # a hang guard: it ends when the parent is done
while time.monotonic() < deadline:
    finished = store.get_run("end") is not None  # saved after the last command was posted
    taken.extend(c.command_id for c in store.take_commands())
    if finished:
        break
print(json.dumps(taken), flush=True)
"""
)


def spawn(code: str, *args: str) -> subprocess.Popen[str]:
    """Start a child and wait until it says it is ready (has opened the store, or is set)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = SRC + os.pathsep + env.get("PYTHONPATH", "")
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert child.stdout is not None
    line = child.stdout.readline()  # blocks until the child has opened the store
    assert line.strip() == "ready", (line, child.stderr.read() if child.stderr else "")
    return child


def test_another_process_reads_whole_batches_and_posts_commands(db_path: Path) -> None:
    store = SQLiteStore(db_path)
    child = spawn(READER, str(db_path), str(BATCHES * PER_BATCH))
    taken: list[int] = []
    for b in range(BATCHES):
        with store.batch():
            for i in range(PER_BATCH):
                store.save_run(run(f"b{b:03d}-{i}", created_at=float(b)))
                store.append_event(event(f"b{b:03d}-{i}"))
            taken.extend(c.command_id for c in store.take_commands())
    out, err = child.communicate(timeout=110)
    assert child.returncode == 0, err
    report = json.loads(out.strip().splitlines()[-1])
    counts, posted = report["counts"], report["posted"]
    assert counts[-1] == BATCHES * PER_BATCH
    assert all(n % PER_BATCH == 0 for n in counts), sorted(set(counts))  # never half a batch
    assert counts == sorted(counts)
    taken.extend(c.command_id for c in store.take_commands())
    assert sorted(taken) == sorted(posted) and len(set(taken)) == len(taken)
    assert store.take_commands() == []


@pytest.fixture(params=["sqlite", "postgres"])
def where(request: pytest.FixtureRequest, db_path: Path) -> str:
    """A SQLite file, or a PostgreSQL database of the test's own."""
    if request.param == "postgres":
        return str(request.getfixturevalue("pg_url"))
    return str(db_path)


def _pending(where: str) -> Callable[[], int]:
    """Counts the commands not taken yet, on a connection of its own."""
    if where.startswith("postgresql://"):
        import psycopg

        conn = psycopg.connect(where, autocommit=True)
        query = "SELECT count(*) FROM subagents.commands WHERE taken_at IS NULL"
        return lambda: int(conn.execute(query).fetchone()[0])  # type: ignore[index]
    pending = sqlite3.connect(where)
    return lambda: int(
        pending.execute("SELECT count(*) FROM commands WHERE taken_at IS NULL").fetchone()[0]
    )


def test_each_command_is_taken_by_exactly_one_of_several_processes(where: str) -> None:
    """On PostgreSQL the takers claim FOR UPDATE SKIP LOCKED: each a different command,
    none waiting for another."""
    store = open_location(store_location(where))
    takers = [spawn(TAKER, where) for _ in range(3)]
    posted: list[int] = []
    pending = _pending(where)
    for r in range(60):  # in rounds, so the takers race for each round's commands
        with store.batch():
            posted.extend(store.post_command("send", f"r{r}", str(i)) for i in range(5))
        wait_until(lambda: not pending(), "the takers taking every command", pace=0.001)
    store.save_run(run("end"))
    results: list[int] = []
    for child in takers:
        out, err = child.communicate(timeout=110)
        assert child.returncode == 0, err
        results.extend(json.loads(out.strip().splitlines()[-1]))
    results.extend(c.command_id for c in store.take_commands())  # any a taker left behind
    assert sorted(results) == posted
    assert len(results) == len(set(results))
    store.close()


def test_another_process_sees_a_run_once_its_write_returns(db_path: Path) -> None:
    store = SQLiteStore(db_path)
    store.save_run(run("r1", task="visible"))
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            QUIET + "from subagents.store.sqlite import SQLiteStore\n"
            "print(SQLiteStore(sys.argv[1]).get_run('r1').task)",
            str(db_path),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": SRC},
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "visible"


OPENER = (
    QUIET
    + """
import sys
from subagents.store.sqlite import SQLiteStore
from subagents.messages import RunRecord
print("ready", flush=True)
sys.stdin.readline()  # the go signal: every opener starts at once
store = SQLiteStore(sys.argv[1])
store.save_run(RunRecord(run_id=sys.argv[2], agent="a", task="t", root_run_id=sys.argv[2]))
print(store.found_version, flush=True)
"""
)


def test_several_processes_creating_one_new_store_create_it_once(db_path: Path) -> None:
    openers = [spawn(OPENER, str(db_path), f"p{i}") for i in range(4)]
    for child in openers:
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
    outs = []
    for child in openers:
        out, err = child.communicate(timeout=110)
        assert child.returncode == 0, err
        outs.append(out.strip().splitlines()[-1])
    assert outs.count("None") == 1  # exactly one of them found an empty file and created it
    with SQLiteStore(db_path) as store:
        assert sorted(r.run_id for r in store.list_runs()) == ["p0", "p1", "p2", "p3"]
        assert store.meta()["schema_version"] == str(SCHEMA_VERSION)
