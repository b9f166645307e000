"""Bad store files and hostile disks: a clear StoreError naming the file, never silent loss."""

from __future__ import annotations

import hashlib
import json
import os
import random
import sqlite3
from pathlib import Path

import pytest
from storekit import checkpoint, python, run

from subagents.store.base import StoreError
from subagents.store.sqlite import SQLiteStore


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def filled_store(path: Path, runs: int = 200) -> None:
    """A closed store of several pages (closing checkpoints the WAL into the file)."""
    with SQLiteStore(path) as store, store.batch():
        for i in range(runs):
            store.save_run(run(f"r{i:04d}", created_at=float(i), task="x" * 200))
    assert not Path(f"{path}-wal").exists()


def test_random_bytes_behind_a_sqlite_header_are_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    path.write_bytes(b"SQLite format 3\x00" + random.Random(1).randbytes(8192))
    before = digest(path)
    with pytest.raises(StoreError) as err:
        SQLiteStore(path)
    assert str(path) in str(err.value)
    assert "corrupt" in str(err.value) or "not a SQLite database" in str(err.value)
    assert digest(path) == before


def test_damaged_pages_behind_a_valid_header_are_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    filled_store(path)
    data = bytearray(path.read_bytes())
    data[100:4096] = random.Random(2).randbytes(4096 - 100)  # page 1's b-tree: the schema
    path.write_bytes(bytes(data))
    before = digest(path)
    with pytest.raises(StoreError, match=r"runs\.sqlite3: .*(malformed|not a database|corrupt)"):
        SQLiteStore(path)
    assert digest(path) == before


def test_truncated_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    filled_store(path)
    size = path.stat().st_size
    assert size >= 8 * 4096
    with path.open("r+b") as f:
        f.truncate(size // 2)
    with pytest.raises(StoreError, match=r"runs\.sqlite3: truncated database: .* pages"):
        SQLiteStore(path)
    assert path.stat().st_size == size // 2


def test_database_cut_inside_its_header_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    filled_store(path)
    with path.open("r+b") as f:
        f.truncate(60)
    with pytest.raises(StoreError, match=r"truncated database: 60 bytes"):
        SQLiteStore(path)


def test_a_file_that_is_not_sqlite_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("my precious notes\n" * 100)
    before = digest(path)
    with pytest.raises(StoreError, match=r"notes\.txt: not a SQLite database .*b'my precious"):
        SQLiteStore(path)
    assert digest(path) == before


def test_a_foreign_database_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    raw = sqlite3.connect(path)
    raw.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    raw.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY)")
    raw.execute("INSERT INTO users (name) VALUES ('ada')")
    raw.commit()
    raw.close()
    before = digest(path)
    with pytest.raises(StoreError) as err:
        SQLiteStore(path)
    message = str(err.value)
    assert str(path) in message and "not a subagents store" in message
    assert "orders, users" in message
    assert digest(path) == before
    assert not Path(f"{path}-wal").exists()


def test_a_foreign_database_with_a_meta_table_is_still_foreign(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    raw = sqlite3.connect(path)
    raw.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
    raw.execute("INSERT INTO meta VALUES ('application', 'someone-else')")
    raw.commit()
    raw.close()
    with pytest.raises(StoreError, match="not a subagents store"):
        SQLiteStore(path)


def test_an_empty_file_becomes_a_store(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    path.touch()
    with SQLiteStore(path) as store:
        store.save_run(run("r1"))
        assert store.found_version is None
    with SQLiteStore(path) as store:
        assert store.get_run("r1") == run("r1")


def test_a_directory_as_the_path_is_refused(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="is a directory"):
        SQLiteStore(tmp_path)


def test_a_file_where_the_directory_should_be_is_refused(tmp_path: Path) -> None:
    (tmp_path / "blocker").write_text("x")
    with pytest.raises(StoreError, match=r"blocker/runs\.sqlite3: .*blocker"):
        SQLiteStore(tmp_path / "blocker" / "runs.sqlite3")


def _open_in_child(path: Path) -> dict[str, str]:
    """Open the store in a process that obeys file permissions even as root."""
    result = python(
        """
        import json, sys
        from subagents.store.base import StoreError
        from subagents.store.sqlite import SQLiteStore
        try:
            SQLiteStore(sys.argv[1]).close()
            print(json.dumps({"opened": "yes"}))
        except StoreError as exc:
            print(json.dumps({"error": str(exc)}))
        """,
        str(path),
        drop_root=True,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_a_read_only_file_is_refused_clearly(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    filled_store(path, runs=3)
    before = digest(path)
    os.chmod(path, 0o400)
    got = _open_in_child(path)
    assert got.get("error", "").startswith(f"{path}: read-only path"), got
    assert digest(path) == before


def test_a_read_only_directory_is_refused_clearly(tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    os.chmod(ro, 0o500)
    try:
        got = _open_in_child(ro / "runs.sqlite3")
        assert got.get("error", "").startswith(f"{ro}/runs.sqlite3: read-only directory {ro}"), got
        assert list(ro.iterdir()) == []
    finally:
        os.chmod(ro, 0o700)


def test_a_store_in_a_directory_made_read_only_is_refused(tmp_path: Path) -> None:
    d = tmp_path / "d"
    path = d / "runs.sqlite3"
    filled_store(path, runs=3)
    os.chmod(d, 0o500)
    try:
        got = _open_in_child(path)
        assert "read-only directory" in got.get("error", ""), got
    finally:
        os.chmod(d, 0o700)


def test_full_disk_rolls_back_the_whole_batch(db_path: Path) -> None:
    store = SQLiteStore(db_path, max_bytes=256 * 1024)
    store.save_run(run("committed"))
    big = "x" * 20_000
    reached: list[int] = []
    with pytest.raises(StoreError, match=r"runs\.sqlite3: .*disk full"), store.batch():
        store.save_run(run("in-batch"))
        for step in range(50):
            store.save_checkpoint(checkpoint(f"cp{step}", step, big))
            reached.append(step)
    assert len(reached) >= 2  # the batch had written several checkpoints before the disk filled
    # nothing of the batch is visible, from this connection or a new uncapped one
    for s in (store, SQLiteStore(db_path)):
        assert [r.run_id for r in s.list_runs()] == ["committed"]
        assert s.load_checkpoint("cp0") is None


def test_a_caught_disk_full_error_still_aborts_the_batch(db_path: Path) -> None:
    store = SQLiteStore(db_path, max_bytes=256 * 1024)
    big = "x" * 20_000
    with pytest.raises(StoreError, match="batch rolled back: a write in it failed"), store.batch():
        store.save_run(run("in-batch"))
        with pytest.raises(StoreError, match="disk full"):
            for step in range(50):
                store.save_checkpoint(checkpoint(f"cp{step}", step, big))
        # the caller swallowed the error: later writes are refused, not committed alone
        with pytest.raises(StoreError, match="aborted"):
            store.save_run(run("after-error"))
    assert SQLiteStore(db_path).list_runs() == []


def test_full_disk_outside_a_batch_loses_only_that_write(db_path: Path) -> None:
    store = SQLiteStore(db_path, max_bytes=256 * 1024)
    store.save_run(run("small"))
    with pytest.raises(StoreError, match="disk full"):
        for step in range(50):
            store.save_checkpoint(checkpoint(f"cp{step}", step, "y" * 20_000))
    saved = [s for s in range(50) if store.load_checkpoint(f"cp{s}") is not None]
    assert len(saved) >= 2  # the cap let some writes in before it was reached
    assert saved == list(range(len(saved)))  # every write that returned is there, in order
    assert store.get_run("small") == run("small")


def test_damage_past_the_schema_is_found_by_verify_and_by_reads(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    filled_store(path)
    data = bytearray(path.read_bytes())
    page = 4096
    last = len(data) // page - 1
    data[last * page : (last + 1) * page] = random.Random(3).randbytes(page)
    path.write_bytes(bytes(data))
    store = SQLiteStore(path)  # the header and the schema are intact: opening is cheap
    with pytest.raises(StoreError, match=r"runs\.sqlite3: (checking the database: )?corrupt"):
        store.verify()
    with pytest.raises(StoreError, match=r"runs\.sqlite3: listing runs: corrupt database"):
        store.list_runs()
