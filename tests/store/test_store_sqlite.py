"""SQLiteStore beyond the protocol: durability across reopen, atomic batches, threads, modes."""

from __future__ import annotations

import os
import sqlite3
import stat
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
