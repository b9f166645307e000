"""``store.unused_file``: whether a SQLite store's file is unused (nobody connected, nothing
recorded), read through SQLite's own locks and the file as it lies. Real SQLite files, a
real second process holding a connection (POSIX locks are per process: a connection of
this process would not be seen)."""

from __future__ import annotations

from pathlib import Path

import pytest
from storekit import event, run

from held_open import held_open
from subagents.store.sqlite import SQLiteStore
from subagents.store.unused_file import held_alone, nothing_recorded

WAIT = 60.0

HOLD = """
import sys
from subagents.store.sqlite import SQLiteStore
store = SQLiteStore(sys.argv[1])
store.list_runs(limit=1)  # (connected: its -shm mapped, its DMS byte read-locked)
print("open", flush=True)
sys.stdin.readline()
store.close()
"""


def _closed_store(path: Path) -> Path:
    SQLiteStore(path).close()
    return path


def test_a_closed_store_is_held_alone_and_the_shm_it_made_goes_again(tmp_path: Path) -> None:
    path = _closed_store(tmp_path / "runs.sqlite3")
    assert not Path(f"{path}-shm").exists()  # (the last connection removed it)
    with held_alone(path) as alone:
        assert alone
        assert Path(f"{path}-shm").exists()  # made to be locked, held while the block runs
    assert not Path(f"{path}-shm").exists()


def test_a_store_another_process_has_open_is_not_alone(tmp_path: Path) -> None:
    path = _closed_store(tmp_path / "runs.sqlite3")
    with held_open(HOLD, path, timeout=WAIT):
        with held_alone(path) as alone:
            assert not alone
        assert Path(f"{path}-shm").exists()  # its own, left as it was
    with held_alone(path) as alone:
        assert alone  # let go of: nobody's now


@pytest.mark.parametrize("record", ["run", "event"])
def test_a_store_with_anything_recorded_is_not_unused(tmp_path: Path, record: str) -> None:
    path = _closed_store(tmp_path / "runs.sqlite3")
    assert nothing_recorded(path)
    store = SQLiteStore(path)
    if record == "run":
        store.save_run(run("r1"))
    else:
        store.append_event(event("r1"))
    assert not nothing_recorded(path)  # still in the WAL (open): its frames count
    store.close()  # (checkpointed into the file)
    assert not Path(f"{path}-wal").exists()
    assert not nothing_recorded(path)


def test_a_file_that_is_no_store_is_not_called_unused(tmp_path: Path) -> None:
    """What cannot be read is kept: never removed as unused."""
    path = tmp_path / "notes.txt"
    path.write_text("not a database")
    assert not nothing_recorded(path)
    assert not nothing_recorded(tmp_path / "missing.sqlite3")
