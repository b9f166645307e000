"""A SQLite lease's fence held in the schema (``store.lease_fences``, v17): a view exists
while the taking it names holds its lease, every end of the taking drops it, and the
sender's one statement names it instead of reading the ``leases`` table."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import msgspec
import pytest
from storekit import LEASE, fenced, mail, rows, run, store_of_version, traced

from subagents.messages import RunStatus
from subagents.store import lease_fences
from subagents.store.base import Fenced
from subagents.store.fencing import Fence, FencedStore
from subagents.store.migrations import SCHEMA_VERSION
from subagents.store.schema import set_schema_version
from subagents.store.sqlite import SQLiteStore
from subagents.store.writes import AttemptFence


def _views(path: Path) -> set[str]:
    found = rows(path, "SELECT name FROM sqlite_master WHERE type = 'view'")
    return {str(name) for (name,) in found}


def test_a_taking_makes_its_view_and_each_end_of_it_drops_it(sqlite_store: SQLiteStore) -> None:
    """Taken: its view. Renewed: kept. Taken again by its owner: the earlier taking's view
    gone, the new one's made. Released by a stale keeper (an earlier epoch): the later
    taking's view kept. Released at its epoch, or by owner alone (``subagents stop``, a
    takeover): gone."""
    path = sqlite_store.path
    first = sqlite_store.acquire_lease(LEASE)
    assert _views(path) == {lease_fences.view_of(first)}
    assert sqlite_store.renew_lease(msgspec.structs.replace(LEASE, epoch=first, renewed_at=2.0))
    assert _views(path) == {lease_fences.view_of(first)}
    again = sqlite_store.acquire_lease(LEASE)
    assert _views(path) == {lease_fences.view_of(again)}
    sqlite_store.release_lease(LEASE.owner, first)  # a stale keeper's: not the later taking
    assert _views(path) == {lease_fences.view_of(again)}
    sqlite_store.release_lease(LEASE.owner, again)
    assert _views(path) == set()
    other = msgspec.structs.replace(LEASE, owner="h:2:b")
    sqlite_store.acquire_lease(other)
    with sqlite_store.batch():  # (a takeover's: by owner, in its batch)
        sqlite_store.release_lease(other.owner)
    assert _views(path) == set() and sqlite_store.leases() == []


def test_the_one_statement_reads_no_lease(sqlite_store: SQLiteStore) -> None:
    """The statement run per durable mail opens neither the ``leases`` table nor its index:
    its fence is the view's name, checked as it is compiled."""
    store = fenced(sqlite_store)
    store.save_run(run("s", status=RunStatus.RUNNING))
    with traced(sqlite_store) as statements:
        store.record_mails([mail("m1", "s", "o")], None, AttemptFence("s"))
    (statement,) = statements
    path = sqlite_store.path
    pages = {
        p for (p,) in rows(path, "SELECT rootpage FROM sqlite_master WHERE tbl_name = 'leases'")
    }
    program = rows(path, f"EXPLAIN {statement}")
    opened = {row[2] for row in program if row[1] in ("OpenRead", "OpenWrite")}
    assert pages and not pages & opened
    assert lease_fences.view_of(store.fence.epoch) in statement  # type: ignore[union-attr]


@pytest.mark.parametrize("end", ["released", "taken_again"])
def test_a_statement_compiled_under_the_lease_is_fenced_once_another_process_ends_it(
    sqlite_store: SQLiteStore, end: str
) -> None:
    """The sender's statement, compiled and cached while the lease was held, is compiled
    again once another connection ended the taking (a schema change), finds no view, and
    writes nothing; the record made again as statements says ``Fenced``."""
    store = fenced(sqlite_store)
    store.save_run(run("s", status=RunStatus.RUNNING))
    store.record_mails([mail("m1", "s", "o")], None, AttemptFence("s"))
    with SQLiteStore(sqlite_store.path) as taker:
        if end == "released":
            with taker.batch():
                taker.release_lease(LEASE.owner)
        else:
            taker.acquire_lease(LEASE)
    with pytest.raises(Fenced, match="no longer held"):
        store.record_mails([mail("m2", "s", "o")], None, AttemptFence("s"))
    assert [m.mail_id for m in sqlite_store.mail_for("s")] == ["m1"]


def test_a_lease_taken_before_v17_has_no_view_and_its_records_go_by_the_statements(
    tmp_path: Path,
) -> None:
    """A lease written by a runtime of v16 (no view) and held across the upgrade: its
    sender's one statement finds no view, and the record made again as statements reads
    the lease, held, and keeps the mail; once the lease is released, the same refuses."""
    path = tmp_path / "runs.sqlite3"
    conn = store_of_version(path, 16)
    conn.execute(
        "INSERT INTO runs (run_id, agent, status, root_run_id, depth, created_at, record)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        ("s", "a", "running", "s", 0, 1.0, msgspec.json.encode(run("s")).decode()),
    )
    held = msgspec.structs.replace(LEASE, epoch=4)
    conn.execute(  # as v16's acquire_lease wrote it: no view
        "INSERT INTO leases (owner, epoch, host, pid, renewed_at, expires_at, lease)"
        " VALUES (?, 4, 'h', 1, 1.0, 16.0, ?)",
        (held.owner, msgspec.json.encode(held).decode()),
    )
    conn.execute("COMMIT")
    conn.close()
    with SQLiteStore(path) as store:
        assert (store.found_version, store.schema_version) == (16, 17)
        assert _views(path) == set()
        writer = FencedStore(store, Fence(held.owner, 4))
        writer.record_mails([mail("m1", "s", "o")], None, AttemptFence("s"))
        store.release_lease(held.owner)  # (no view to drop: the guard lets it go)
        with pytest.raises(Fenced):
            writer.record_mails([mail("m2", "s", "o")], None, AttemptFence("s"))
        assert [m.mail_id for m in store.mail_for("s")] == ["m1"]


def _guards(path: Path) -> list[str]:
    found = rows(
        path, "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'leases'"
    )
    return sorted(str(name) for (name,) in found if str(name).startswith("leases_fence_"))


def test_the_guards_read_the_schema_table_by_the_name_every_sqlite_knows(
    sqlite_store: SQLiteStore,
) -> None:
    """The guards' ``WHEN`` reads the schema table as ``sqlite_master``: ``sqlite_schema``
    is SQLite 3.33's name, and on an older SQLite (Ubuntu 20.04's 3.31, RHEL 8's 3.26, which
    the store still serves) a trigger naming it fails to compile, and with it every release
    and takeover of a lease. (This machine's SQLite knows both names: the text is what can
    be checked here.) Seen failing with the guards reading ``sqlite_schema``."""
    path = sqlite_store.path
    found = rows(
        path, "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'leases'"
    )
    guards = [str(sql) for (sql,) in found if "lease_fence_" in str(sql)]
    assert len(guards) == 2
    for sql in guards:
        assert "sqlite_master" in sql and "sqlite_schema" not in sql


def _fenced_round(path: Path) -> None:
    """The fence at work on the file at ``path``: a taking makes its view, a durable mail
    goes by the one statement, an end by an older runtime (its row deleted with the view
    left) is refused, the release drops the view, and the stalled sender is then fenced."""
    with SQLiteStore(path) as store:
        store.save_run(run("s", status=RunStatus.RUNNING))
        writer = fenced(store)
        epoch = writer.fence.epoch  # type: ignore[union-attr]
        assert lease_fences.view_of(epoch) in _views(path)
        writer.record_mails([mail("m1", "s", "o")], None, AttemptFence("s"))
        older = sqlite3.connect(path, isolation_level=None)
        with pytest.raises(sqlite3.IntegrityError, match="before v17 cannot end it"):
            older.execute("DELETE FROM leases WHERE owner = ?", (LEASE.owner,))
        older.close()
        store.release_lease(LEASE.owner, epoch)
        assert lease_fences.view_of(epoch) not in _views(path)
        with pytest.raises(Fenced):
            writer.record_mails([mail("m2", "s", "o")], None, AttemptFence("s"))
        assert [m.mail_id for m in store.mail_for("s")] == ["m1"]


@pytest.mark.parametrize("version", range(1, SCHEMA_VERSION))
def test_a_file_of_every_earlier_version_is_upgraded_with_its_guards(
    tmp_path: Path, version: int
) -> None:
    """A file of each earlier version (v16: ``end_kept``, the version a v16 runtime left,
    so the file is upgraded twice, once by that runtime and once here) gets the two guards
    once, and its leases are fenced by their views."""
    path = tmp_path / "runs.sqlite3"
    conn = store_of_version(path, version)
    conn.execute("COMMIT")
    conn.close()
    with SQLiteStore(path) as store:
        assert (store.found_version, store.schema_version) == (version, SCHEMA_VERSION)
    assert _guards(path) == ["leases_fence_on_delete", "leases_fence_on_epoch"]
    _fenced_round(path)


@pytest.mark.parametrize("back_to", [14, 15, 16])
def test_a_file_set_back_and_upgraded_again_keeps_its_guards_and_held_views(
    tmp_path: Path, back_to: int
) -> None:
    """A v17 file whose version was set back (the migrations from there run again over a
    schema that has their objects: the guards made ``IF NOT EXISTS``) opens, keeps the
    guards once, and keeps the view of a lease held across it: its sender writes on."""
    path = tmp_path / "runs.sqlite3"
    with SQLiteStore(path) as store:
        store.save_run(run("s", status=RunStatus.RUNNING))
        writer = fenced(store)
        writer.record_mails([mail("m1", "s", "o")], None, AttemptFence("s"))
        epoch = writer.fence.epoch  # type: ignore[union-attr]
        with sqlite3.connect(path) as conn:
            set_schema_version(conn, back_to)
        conn.close()
        with SQLiteStore(path) as again:
            assert (again.found_version, again.schema_version) == (back_to, SCHEMA_VERSION)
        assert _guards(path) == ["leases_fence_on_delete", "leases_fence_on_epoch"]
        assert lease_fences.view_of(epoch) in _views(path)
        writer.record_mails([mail("m2", "s", "o")], None, AttemptFence("s"))
        assert [m.mail_id for m in store.mail_for("s")] == ["m1", "m2"]


def test_a_taking_drops_the_views_of_the_leases_lapsed_by_then(sqlite_store: SQLiteStore) -> None:
    """A runtime that crashed holding its lease, whose runs nobody took over, left its view;
    the next taking (a later runtime's start) drops it in its own transaction, and keeps a
    live lease's. The lapsed lease's row stays; its owner, had it only stalled, writes on
    (its one statement finds no view: the statements read its lease), and is fenced once
    its lease is ended (its takeover)."""
    path = sqlite_store.path
    live = msgspec.structs.replace(LEASE, owner="live:2:b", renewed_at=100.0, expires_at=200.0)
    crashed = msgspec.structs.replace(LEASE, owner="gone:3:c", renewed_at=1.0, expires_at=16.0)
    live_epoch = sqlite_store.acquire_lease(live)
    stalled = FencedStore(sqlite_store, Fence(crashed.owner, sqlite_store.acquire_lease(crashed)))
    assert stalled.fence is not None
    crashed_view = lease_fences.view_of(stalled.fence.epoch)
    assert _views(path) == {lease_fences.view_of(live_epoch), crashed_view}
    later = msgspec.structs.replace(LEASE, owner="later:4:d", renewed_at=150.0, expires_at=165.0)
    later_epoch = sqlite_store.acquire_lease(later)
    assert _views(path) == {lease_fences.view_of(live_epoch), lease_fences.view_of(later_epoch)}
    assert {lease.owner for lease in sqlite_store.leases()} == {
        live.owner,
        crashed.owner,
        later.owner,
    }
    stalled.save_run(run("s", status=RunStatus.RUNNING))
    stalled.record_mails([mail("m1", "s", "o")], None, AttemptFence("s"))
    with sqlite_store.batch():  # (a takeover's release)
        sqlite_store.release_lease(crashed.owner)
    with pytest.raises(Fenced, match="no longer held"):
        stalled.record_mails([mail("m2", "s", "o")], None, AttemptFence("s"))
    assert [m.mail_id for m in sqlite_store.mail_for("s")] == ["m1"]


def test_a_stalled_owner_waking_after_its_view_was_dropped_writes_until_its_runs_are_taken(
    sqlite_store: SQLiteStore,
) -> None:
    """Two handles on one file: the stalled runtime's (its sender's statement compiled and
    cached while its view stood) and another runtime's, whose start drops the stalled
    lease's view (lapsed by then). Woken, the stalled one writes on while nobody took its
    lease (its mail by the statements, its supervisor's batch, its renewal), and once the
    other takes its runs (the takeover's release) every write of it is refused, nothing
    of it kept. Its renewal makes its view again (its one statement per mail again)."""
    stalled = fenced(sqlite_store)
    assert stalled.fence is not None
    stalled.save_run(run("s", status=RunStatus.RUNNING))
    stalled.record_mails([mail("m1", "s", "o")], None, AttemptFence("s"))  # (compiled, cached)
    view = lease_fences.view_of(stalled.fence.epoch)
    with SQLiteStore(sqlite_store.path) as other:
        later = msgspec.structs.replace(LEASE, owner="h:2:b", renewed_at=100.0, expires_at=115.0)
        other.acquire_lease(later)
        assert view not in _views(sqlite_store.path)
        stalled.record_mails([mail("m2", "s", "o")], None, AttemptFence("s"))
        stalled.save_run(run("s", status=RunStatus.WAITING))
        woken = msgspec.structs.replace(
            LEASE, epoch=stalled.fence.epoch, renewed_at=101.0, expires_at=116.0
        )
        assert sqlite_store.renew_lease(woken)
        assert view in _views(sqlite_store.path)  # (made again: its one statement again)
        with traced(sqlite_store) as statements:
            stalled.record_mails([mail("m3", "s", "o")], None, AttemptFence("s"))
        assert len(statements) == 1 and view in statements[0]
        with other.batch():  # (a takeover's release, by the other runtime's connection)
            other.release_lease(LEASE.owner)
        with pytest.raises(Fenced, match="no longer held"):
            stalled.record_mails([mail("m4", "s", "o")], None, AttemptFence("s"))
        with pytest.raises(Fenced, match="no longer held"):
            stalled.save_run(run("s", status=RunStatus.RUNNING))
        assert not sqlite_store.renew_lease(woken)
        assert [m.mail_id for m in other.mail_for("s")] == ["m1", "m2", "m3"]
        kept = other.get_run("s")
        assert kept is not None and kept.status is RunStatus.WAITING
