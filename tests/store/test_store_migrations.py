"""Schema versions: a store made by the first schema upgrades with its data; newer is refused."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import msgspec
import pytest
from storekit import checkpoint, event, mail, outcome, run

from subagents.messages import CheckpointDelta, RunStatus, Subscription
from subagents.store.base import StoreError
from subagents.store.migrations import MIGRATIONS, SCHEMA_VERSION
from subagents.store.schema import create_v1
from subagents.store.sqlite import SQLiteStore


def enc(obj: msgspec.Struct) -> str:
    return msgspec.json.encode(obj).decode()


def make_v1_store(path: Path) -> None:
    """A store exactly as the v1 code wrote it: v1 DDL, rows in the v1 layout."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("BEGIN")
    create_v1(conn)
    done = run("done", created_at=1.0, status=RunStatus.COMPLETED, ended_at=2.0, cleanup="delete")
    live = run("live", created_at=3.0, status=RunStatus.RUNNING)
    for r in (done, live):
        conn.execute(
            "INSERT INTO runs (run_id, agent, status, root_run_id, parent_run_id, depth, "
            "created_at, ended_at, record) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                r.run_id,
                r.agent,
                r.status.value,
                r.root_run_id,
                r.parent_run_id,
                r.depth,
                r.created_at,
                r.ended_at,
                enc(r),
            ),
        )
    e = event("live")
    conn.execute(
        "INSERT INTO events (run_id, kind, ts, event) VALUES (?, ?, ?, ?)",
        (e.run_id, e.kind.value, e.ts, enc(e)),
    )
    cp = checkpoint("live", 4)
    conn.execute(
        "INSERT INTO checkpoints (run_id, step, ts, checkpoint) VALUES (?, ?, ?, ?)",
        (cp.run_id, cp.step, cp.ts, enc(cp)),
    )
    m = mail("m1", "done", "live")
    conn.execute(
        "INSERT INTO mail (mail_id, sender, recipient, state, sent_at, mail) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (m.mail_id, m.sender, m.recipient, m.state.value, m.sent_at, enc(m)),
    )
    o = outcome("done")
    conn.execute(
        "INSERT INTO outcomes (run_id, status, delivered, outcome) VALUES (?, ?, 0, ?)",
        (o.run_id, o.status.value, enc(o)),
    )
    conn.execute(
        "INSERT INTO commands (kind, run_id, content, ts) VALUES ('send', 'live', 'hey', 5.0)"
    )
    conn.execute("COMMIT")
    conn.close()


def columns(path: Path, table: str) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        return [str(row[1]) for row in conn.execute(f"PRAGMA table_info({table})")]
    finally:
        conn.close()


def test_the_current_schema_is_v1_plus_every_migration() -> None:
    assert SCHEMA_VERSION == 1 + len(MIGRATIONS) == 17


def test_a_v1_store_is_upgraded_with_its_data(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    make_v1_store(path)
    assert "archived_at" not in columns(path, "runs")
    with SQLiteStore(path) as store:
        assert (store.found_version, store.schema_version) == (1, SCHEMA_VERSION)
        assert store.meta()["schema_version"] == str(SCHEMA_VERSION)
        assert store.leases() == []  # v3: the lease table, empty
        assert store.previews(["live"]) == {}  # v8: the previews table, empty
        assert [r.run_id for r in store.list_runs()] == ["done", "live"]
        assert store.get_run("done") == run(
            "done", created_at=1.0, status=RunStatus.COMPLETED, ended_at=2.0, cleanup="delete"
        )
        assert store.events("live") == [event("live")]
        assert store.load_checkpoint("live") == checkpoint("live", 4)
        assert store.mail_for("live") == [mail("m1", "done", "live")]
        assert store.undelivered_outcomes() == [outcome("done")]
        assert [(c.kind, c.run_id, c.content) for c in store.take_commands()] == [
            ("send", "live", "hey")
        ]
        # new rows keep their order after the old ones
        store.save_mail(mail("m2", "live", "done"))
        assert [m.mail_id for m in store.mail_for("live")] == ["m1", "m2"]
    assert {"archived_at", "cleanup"} <= set(columns(path, "runs"))
    conn = sqlite3.connect(path)
    # the cleanup choice was carried over from each v1 record
    assert dict(conn.execute("SELECT run_id, cleanup FROM runs").fetchall()) == {
        "done": "delete",
        "live": "keep",
    }
    conn.close()
    # the migrated store sweeps like a new one: the v1 run's cleanup=delete is honoured
    with SQLiteStore(path) as store:
        store.save_checkpoint(checkpoint("done", 9))
        report = store.sweep(now=10_000.0, archive_after_minutes=1)
        assert report.archived == ("done",) and report.cleaned == ("done",)
        assert store.load_checkpoint("done") is None
        assert store.load_checkpoint("live") == checkpoint("live", 4)
        assert store.journal_of("live") == []  # v4: journals, empty for runs of before
        # v5: checkpoint deltas, applied to a checkpoint written before the upgrade
        store.add_to_checkpoint(CheckpointDelta(run_id="live", step=4, started="tu2"))
        loaded = store.load_checkpoint("live")
        assert loaded is not None and loaded.started == ("tu2",)
        assert store.list_approvals() == []  # v6: approvals, none for runs of before
        # v7: topic subscriptions, none for runs of before
        assert store.subscriptions() == []
        store.save_subscription(Subscription(run_id="live", root_run_id="live", topic="news"))
        assert [s.topic for s in store.subscriptions(["live"])] == ["news"]
    with SQLiteStore(path) as store:  # opening an up-to-date store migrates nothing
        assert store.found_version == SCHEMA_VERSION


def test_a_failing_migration_leaves_the_v1_store_whole(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    make_v1_store(path)
    conn = sqlite3.connect(path)
    conn.execute("CREATE INDEX runs_sweep ON runs (status)")  # v2 will try to create it
    conn.commit()
    conn.close()
    with pytest.raises(
        StoreError, match=r"runs\.sqlite3: creating or upgrading the schema: .*runs_sweep"
    ):
        SQLiteStore(path)
    assert "archived_at" not in columns(path, "runs")  # the ALTERs before it were undone
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == ("1",)
    assert conn.execute("SELECT count(*) FROM runs").fetchone() == (2,)
    conn.close()


def test_a_newer_store_is_refused_naming_both_versions(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    with SQLiteStore(path) as store:
        store.save_run(run("r1"))
    conn = sqlite3.connect(path)
    newer = SCHEMA_VERSION + 1
    conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(newer),))
    conn.commit()
    conn.close()
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    with pytest.raises(StoreError) as err:
        SQLiteStore(path)
    message = str(err.value)
    assert str(path) in message
    assert f"schema version {newer}" in message and f"this code's {SCHEMA_VERSION}" in message
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before


@pytest.mark.parametrize("value", ["two", "0"])
def test_a_nonsense_schema_version_is_refused(tmp_path: Path, value: str) -> None:
    path = tmp_path / "runs.sqlite3"
    SQLiteStore(path).close()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (value,))
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match=f"corrupt store: meta schema_version is '?{value}'?"):
        SQLiteStore(path)
