"""Two stores on one file in one process, and a close in another: no committed write is lost.

POSIX record locks belong to a process, not to a descriptor: closing *any* descriptor of
the database file drops every lock the process holds on it, SQLite's included. Opening a
second ``SQLiteStore`` on a file this process already has open must therefore not open and
close the file with plain descriptors (its header check, its permissions check); if it did,
the next process to close a store on that file (``subagents ps``) would find no other
process's lock, checkpoint and delete ``-wal``/``-shm`` under the first, and the first
process's later commits would go to a deleted log: gone at its next SIGKILL.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from storekit import SRC

from subagents.store.sqlite import SQLiteStore

HOST = """
import sys
from subagents.logs import configure
configure(level="warning", stream=sys.stderr)
from subagents.messages import RunRecord
from subagents.store.sqlite import SQLiteStore

def record(run_id):
    return RunRecord(run_id=run_id, agent="a", task="t", root_run_id=run_id)

path = sys.argv[1]
first = SQLiteStore(path)
first.save_run(record("before"))
second = SQLiteStore(path)  # a second store on the same file, in the same process
second.get_run("before")
print("ready", flush=True)
sys.stdin.readline()  # another process opens and closes the store meanwhile
first.save_run(record("after"))  # returned: committed, so durable
second.save_run(record("after-second"))
print("written", flush=True)
sys.stdin.readline()  # killed here
"""

CLOSER = """
import sys
from subagents.store.sqlite import SQLiteStore
SQLiteStore(sys.argv[1]).close()  # what `subagents ps` does
"""


def _python(code: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")},
    )


def _said(child: subprocess.Popen[str], word: str) -> None:
    assert child.stdout is not None
    line = child.stdout.readline()
    if line.strip() != word:
        child.kill()
        _out, err = child.communicate(timeout=60)
        raise AssertionError(f"expected {word!r}, got {line!r}; stderr: {err}")


def test_a_commit_survives_sigkill_after_a_second_store_and_a_close_elsewhere(
    db_path: Path,
) -> None:
    host = _python(HOST, str(db_path))
    try:
        _said(host, "ready")
        closer = _python(CLOSER, str(db_path))
        _out, err = closer.communicate(timeout=60)
        assert closer.returncode == 0, err
        # the host still has its connections: its log must still be there for it
        assert Path(f"{db_path}-wal").exists()
        assert host.stdin is not None
        host.stdin.write("go\n")
        host.stdin.flush()
        _said(host, "written")
        host.send_signal(signal.SIGKILL)
        host.wait(timeout=60)
    finally:
        if host.poll() is None:
            host.kill()
            host.wait()
    with SQLiteStore(db_path) as store:
        kept = {r.run_id for r in store.list_runs()}
    assert kept == {"before", "after", "after-second"}
