"""SQLiteStore beyond the protocol: durability across reopen, atomic batches, threads, modes."""

from __future__ import annotations

import os
import sqlite3
import stat
import threading
from pathlib import Path

import pytest
from storekit import checkpoint, event, mail, outcome, run

from subagents.messages import MailState, RunStatus
from subagents.store.base import StoreError
from subagents.store.migrations import SCHEMA_VERSION
from subagents.store.paths import STATE_DIR_ENV
from subagents.store.sqlite import SQLiteStore


def test_everything_survives_close_and_reopen(db_path: Path) -> None:
    with SQLiteStore(db_path) as store:
        with store.batch():
            store.save_run(run("r1", created_at=1.0, status=RunStatus.RUNNING))
            store.append_event(event("r1"))
            store.save_checkpoint(checkpoint("r1", 3))
            store.save_mail(mail("m1", "r1", "r2"))
            store.save_outcome(outcome("r2"))
        store.set_mail_state("m1", MailState.DELIVERED)
        command_id = store.post_command("send", "r1", "more")
    with SQLiteStore(db_path) as store:
        assert store.found_version == SCHEMA_VERSION
        assert store.list_runs() == [run("r1", created_at=1.0, status=RunStatus.RUNNING)]
        assert store.events("r1") == [event("r1")]
        assert store.load_checkpoint("r1") == checkpoint("r1", 3)
        assert [m.state for m in store.mail_for("r2")] == [MailState.DELIVERED]
        assert store.undelivered_outcomes() == [outcome("r2")]
        assert [c.command_id for c in store.take_commands()] == [command_id]
        assert store.meta() == {"application": "subagents", "schema_version": str(SCHEMA_VERSION)}
        store.verify()


def test_exception_inside_batch_rolls_back_everything(db_path: Path) -> None:
    store = SQLiteStore(db_path)
    store.save_run(run("kept"))
    with pytest.raises(RuntimeError, match="boom"), store.batch():
        store.save_run(run("r1"))
        store.append_event(event("kept"))
        with store.batch():
            store.save_checkpoint(checkpoint("kept", 1))
        store.save_outcome(outcome("kept"))
        store.post_command("stop", "kept")
        raise RuntimeError("boom")
    for s in (store, SQLiteStore(db_path)):  # this connection and a fresh one agree
        assert s.list_runs() == [run("kept")]
        assert s.events("kept") == []
        assert s.load_checkpoint("kept") is None
        assert s.undelivered_outcomes() == []
    assert store.take_commands() == []
    # and the store goes on working after the rollback
    store.save_run(run("after"))
    assert [r.run_id for r in SQLiteStore(db_path).list_runs()] == ["after", "kept"]


def test_nested_batch_failure_undoes_only_its_own_writes(sqlite_store: SQLiteStore) -> None:
    with sqlite_store.batch():
        sqlite_store.save_run(run("outer1"))
        with pytest.raises(KeyError), sqlite_store.batch():
            sqlite_store.save_run(run("inner"))
            raise KeyError("inner fails")
        sqlite_store.save_run(run("outer2"))
    assert [r.run_id for r in sqlite_store.list_runs()] == ["outer1", "outer2"]


def test_batch_is_invisible_to_other_connections_until_commit(db_path: Path) -> None:
    writer = SQLiteStore(db_path)
    reader = SQLiteStore(db_path)
    with writer.batch():
        writer.save_run(run("r1"))
        writer.append_event(event("r1"))
        assert reader.get_run("r1") is None
        assert reader.events("r1") == []
        assert writer.get_run("r1") == run("r1")
    assert reader.get_run("r1") == run("r1")
    assert reader.events("r1") == [event("r1")]


def test_write_outside_a_batch_commits_at_once(db_path: Path) -> None:
    writer = SQLiteStore(db_path)
    reader = SQLiteStore(db_path)
    writer.save_run(run("r1"))
    assert reader.get_run("r1") == run("r1")
    writer.save_outcome(outcome("r1"))
    assert reader.undelivered_outcomes() == [outcome("r1")]


def test_reader_threads_never_see_half_a_batch(sqlite_store: SQLiteStore) -> None:
    batches, per_batch = 40, 10
    done = threading.Event()
    seen: list[int] = []
    errors: list[BaseException] = []

    def write() -> None:
        try:
            for b in range(batches):
                with sqlite_store.batch():
                    for i in range(per_batch):
                        sqlite_store.save_run(run(f"r{b:03d}-{i:02d}", created_at=float(b)))
                        sqlite_store.append_event(event(f"r{b:03d}-{i:02d}"))
        except BaseException as exc:
            errors.append(exc)
        finally:
            done.set()

    def read() -> None:
        try:
            while not done.is_set():
                seen.append(len(sqlite_store.list_runs()))
        except BaseException as exc:
            errors.append(exc)

    readers = [threading.Thread(target=read) for _ in range(3)]
    for t in readers:
        t.start()
    writer = threading.Thread(target=write)
    writer.start()
    writer.join(timeout=30)
    for t in readers:
        t.join(timeout=30)
    assert not writer.is_alive() and not any(t.is_alive() for t in readers)
    assert errors == []
    assert seen, "the readers read nothing"
    assert all(n % per_batch == 0 for n in seen), sorted(set(seen))
    assert len(sqlite_store.list_runs()) == batches * per_batch


def test_closed_store_raises_store_error(db_path: Path) -> None:
    store = SQLiteStore(db_path)
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.get_run("r1")
    with pytest.raises(StoreError, match="closed"):
        store.save_run(run("r1"))


def test_list_runs_accepts_status_strings_and_rejects_unknown_ones(
    sqlite_store: SQLiteStore,
) -> None:
    sqlite_store.save_run(run("r1", status=RunStatus.WAITING))
    assert [r.run_id for r in sqlite_store.list_runs(statuses=["waiting"])] == ["r1"]  # type: ignore[list-item]
    with pytest.raises(ValueError, match="'sleeping'"):
        sqlite_store.list_runs(statuses=["sleeping"])  # type: ignore[list-item]


def test_undecodable_row_is_named_and_other_rows_still_read(
    sqlite_store: SQLiteStore, db_path: Path
) -> None:
    sqlite_store.save_run(run("good"))
    sqlite_store.save_run(run("bad"))
    raw = sqlite3.connect(db_path)
    raw.execute("UPDATE runs SET record = '{\"run_id\": 5}' WHERE run_id = 'bad'")
    raw.commit()
    raw.close()
    with pytest.raises(StoreError, match=r"runs\.sqlite3: cannot read runs row 'bad'"):
        sqlite_store.get_run("bad")
    assert sqlite_store.get_run("good") == run("good")


def test_new_store_file_and_directory_are_private(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "runs.sqlite3"
    old = os.umask(0)  # a permissive umask must not leak into the store's modes
    try:
        store = SQLiteStore(path)
        store.save_run(run("r1"))  # the -wal and -shm files exist while the store is open
        modes = {
            p.name: stat.S_IMODE(p.stat().st_mode)
            for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm"), path.parent)
        }
        store.close()
    finally:
        os.umask(old)
    assert modes == {
        "runs.sqlite3": 0o600,
        "runs.sqlite3-wal": 0o600,
        "runs.sqlite3-shm": 0o600,
        "b": 0o700,
    }


def test_wal_mode_and_synchronous_normal(sqlite_store: SQLiteStore, db_path: Path) -> None:
    raw = sqlite3.connect(db_path)
    assert raw.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    raw.close()
    # synchronous is per connection: ask the store's own
    assert sqlite_store._tx.connection().execute("PRAGMA synchronous").fetchone() == (1,)  # NORMAL


def test_default_path_is_in_the_state_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "state"))
    with SQLiteStore() as store:
        store.save_run(run("r1"))
        assert store.path == tmp_path / "state" / "runs.sqlite3"
    assert stat.S_IMODE((tmp_path / "state").stat().st_mode) == 0o700
    with SQLiteStore(tmp_path / "state" / "runs.sqlite3") as again:
        assert again.get_run("r1") == run("r1")


def test_records_that_could_not_be_read_back_are_refused_by_name(
    sqlite_store: SQLiteStore,
) -> None:
    with sqlite_store.batch():
        sqlite_store.save_run(run("ok"))
        with pytest.raises(ValueError, match=r"cannot store run r1: .*NaN and infinite"):
            sqlite_store.save_run(run("r1", deadline_s=float("inf")))
        with pytest.raises(ValueError, match=r"cannot store an event of run r1: .*object"):
            sqlite_store.append_event(event("r1", unencodable=object()))
        sqlite_store.append_event(event("ok"))
    # the refused writes left nothing behind and did not spoil the batch
    assert [r.run_id for r in sqlite_store.list_runs()] == ["ok"]
    assert sqlite_store.events("ok") == [event("ok")]
    assert sqlite_store.events("r1") == []


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [({"max_bytes": 0}, "max_bytes .* 0"), ({"busy_timeout": -1.0}, "busy_timeout .* -1.0")],
)
def test_bad_settings_are_refused_before_touching_the_disk(
    db_path: Path, kwargs: dict[str, float], named: str
) -> None:
    with pytest.raises(ValueError, match=named):
        SQLiteStore(db_path, **kwargs)  # type: ignore[arg-type]
    assert not db_path.parent.exists()
