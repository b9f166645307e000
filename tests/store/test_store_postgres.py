"""PostgresStore beyond the protocol: its schema (versions, migrations, a schema that is not
ours), several processes creating one store, and what it names in its errors. The rest of
its behaviour is tested with SQLite's (test_store_conformance.py, test_store_durable.py,
test_store_sweep.py)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from storekit import run

from subagents.messages import RunStatus
from subagents.store import postgres_schema
from subagents.store.base import StoreError


def _connect(url: str):  # type: ignore[no-untyped-def]
    import psycopg

    return psycopg.connect(url, autocommit=True)


def _tables(url: str) -> list[str]:
    with _connect(url) as conn:
        rows = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'subagents' ORDER BY 1"
        ).fetchall()
    return [name for (name,) in rows]


def test_a_new_database_gets_the_store_in_a_schema_of_its_own(pg_url: str) -> None:
    from subagents.store.postgres import PostgresStore

    with _connect(pg_url) as conn:  # another application's table, in the default schema
        conn.execute("CREATE TABLE public.orders (id int)")
    store = PostgresStore(pg_url)
    assert (store.found_version, store.schema_version) == (None, postgres_schema.SCHEMA_VERSION)
    assert store.meta() == {
        "application": "subagents",
        "schema_version": str(postgres_schema.SCHEMA_VERSION),
    }
    store.close()
    assert {"runs", "events", "mail", "leases", "journal", "meta"} <= set(_tables(pg_url))
    with _connect(pg_url) as conn:  # the other application's table is untouched
        assert conn.execute("SELECT count(*) FROM public.orders").fetchone() == (0,)


def test_an_added_step_upgrades_an_old_store_keeping_its_rows(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a colleague's table, mirrored here, does: one step appended to MIGRATIONS."""
    from subagents.store.postgres import PostgresStore

    current = postgres_schema.SCHEMA_VERSION
    old = PostgresStore(pg_url)
    old.save_run(run("r1", status=RunStatus.RUNNING))
    old.close()
    step = ("labels", ("CREATE TABLE labels (run_id text PRIMARY KEY, label text)",))
    monkeypatch.setattr(postgres_schema, "MIGRATIONS", (*postgres_schema.MIGRATIONS, step))
    monkeypatch.setattr(postgres_schema, "SCHEMA_VERSION", current + 1)
    new = PostgresStore(pg_url)
    assert (new.found_version, new.schema_version) == (current, current + 1)
    assert new.meta()["schema_version"] == str(current + 1)
    assert new.get_run("r1") == run("r1", status=RunStatus.RUNNING)
    new.close()
    assert "labels" in _tables(pg_url)


def test_a_first_version_store_takes_the_approvals_topics_and_previews_steps(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store made by the first PostgreSQL release (v1: SQLite's v5) opened by this code:
    its rows and pending commands kept, and what v2-v4 add works on it (an ``approval``
    command, which v1's CHECK refused; subscriptions; previews)."""
    from subagents.messages import Preview, Subscription
    from subagents.store.postgres import PostgresStore

    with monkeypatch.context() as m:
        m.setattr(postgres_schema, "MIGRATIONS", postgres_schema.MIGRATIONS[:1])
        m.setattr(postgres_schema, "SCHEMA_VERSION", 1)
        v1 = PostgresStore(pg_url)
        v1.save_run(run("r1", status=RunStatus.RUNNING))
        stop = v1.post_command("stop", "r1")
        with pytest.raises(StoreError, match="commands_kind_check"):
            v1.post_command("approval", "r1", "{}")
        v1.close()
    store = PostgresStore(pg_url)
    assert (store.found_version, store.schema_version) == (1, postgres_schema.SCHEMA_VERSION)
    assert {"approvals", "subscriptions", "previews"} <= set(_tables(pg_url))
    assert store.get_run("r1") == run("r1", status=RunStatus.RUNNING)
    answer = store.post_command("approval", "r1", "{}")
    assert [(c.command_id, c.kind) for c in store.take_commands()] == [
        (stop, "stop"),
        (answer, "approval"),
    ]
    store.save_subscription(Subscription(run_id="r1", root_run_id="r1", topic="news"))
    assert [s.topic for s in store.subscriptions()] == ["news"]
    store.save_preview(Preview(run_id="r1", turn=1, text="so far", chars=6, ts=1.0))
    assert list(store.previews(["r1"])) == ["r1"]
    store.close()


def test_a_newer_or_foreign_schema_is_refused_untouched(pg_url: str) -> None:
    from subagents.store.postgres import PostgresStore

    PostgresStore(pg_url).close()
    with _connect(pg_url) as conn:
        conn.execute("UPDATE subagents.meta SET value = '99' WHERE key = 'schema_version'")
    newer = rf"schema version 99, newer than this code's {postgres_schema.SCHEMA_VERSION}"
    with pytest.raises(StoreError, match=newer):
        PostgresStore(pg_url)
    with _connect(pg_url) as conn:
        conn.execute("DROP SCHEMA subagents CASCADE")
        conn.execute("CREATE SCHEMA subagents")
        conn.execute("CREATE TABLE subagents.things (id int)")
    with pytest.raises(StoreError, match=r"not a subagents store: .* refusing to write to it"):
        PostgresStore(pg_url)
    assert _tables(pg_url) == ["things"]


def test_without_create_a_database_without_a_store_is_refused(pg_url: str) -> None:
    from subagents.store.postgres import PostgresStore

    with pytest.raises(StoreError, match="no run store in this database yet"):
        PostgresStore(pg_url, create=False)
    assert _tables(pg_url) == []


def test_several_processes_creating_one_new_store_create_it_once(pg_url: str) -> None:
    code = """
        import sys
        from subagents.store.postgres import PostgresStore
        store = PostgresStore(sys.argv[1])
        store.save_run(__import__("storekit").run(sys.argv[2]))
        print(store.found_version)
        store.close()
    """
    here = str(Path(__file__).parent)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", f"import sys; sys.path.insert(0, {here!r})\n" + _dedent(code),
             pg_url, f"p{i}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(4)
    ]  # fmt: skip
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err for _out, err in outs]
    found = sorted(out.strip() for out, _err in outs)
    assert found.count("None") == 1, found  # one created it; the others found it made
    from subagents.store.postgres import PostgresStore

    store = PostgresStore(pg_url)
    assert sorted(r.run_id for r in store.list_runs()) == ["p0", "p1", "p2", "p3"]
    store.close()


def _dedent(code: str) -> str:
    return textwrap.dedent(code)


@pytest.mark.usefixtures("pg_server")  # psycopg: skipped saying why without it (CI: failed)
def test_errors_name_the_database_without_its_password() -> None:
    from subagents.store.postgres import PostgresStore

    with pytest.raises(StoreError) as caught:
        PostgresStore("postgresql://me:hunter2@127.0.0.1:9/db")
    message = str(caught.value)
    assert message.startswith("postgresql://me:***@127.0.0.1:9/db: connecting to the database")
    assert "hunter2" not in message


def test_events_are_committed_in_the_order_of_their_numbers(pg_url: str) -> None:
    """A reader following ``events_after`` never skips an event: a transaction that took an
    event's number holds the others' events back until it commits (``EVENTS_LOCK``). Without
    the lock, the second writer's event (numbered after the first's) commits first, and a
    reader that read up to it would never see the first's."""
    import threading

    from storekit import event

    from polling import wait_until
    from subagents.store.postgres import PostgresStore

    first, second, reader = (PostgresStore(pg_url) for _ in range(3))
    try:
        first.save_run(run("r1", status=RunStatus.RUNNING))
        done = threading.Event()
        with first.batch():
            first.append_event(event("r1"))
            first.get_run("r1")  # a read in the batch sends its writes: the number is taken

            def append() -> None:
                second.append_event(event("r2"))
                done.set()

            writer = threading.Thread(target=append)
            writer.start()
            wait_until(lambda: _waits_for_an_advisory_lock(pg_url), "the second writer waiting")
            assert reader.events_after(0) == [] and not done.is_set()
        writer.join(timeout=30)
        assert done.is_set()
        seen = reader.events_after(0)
        assert [s.event.run_id for s in seen] == ["r1", "r2"]
        assert seen[0].seq < seen[1].seq == reader.last_event_seq()
    finally:
        for store in (first, second, reader):
            store.close()


def _waits_for_an_advisory_lock(url: str) -> bool:
    with _connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
        ).fetchone()
    return bool(row and row[0])


def test_two_people_answering_at_once_one_wins_and_the_other_is_refused(pg_url: str) -> None:
    """Where SQLite serialises answerers with its file lock, the approval's row lock does
    here: the second waits for the first's commit, reads the approval answered and is
    refused; one answer, one command. Without ``FOR UPDATE`` the second read it pending,
    overwrote the allow with its deny and posted a second answer."""
    import threading

    from polling import wait_until
    from subagents.messages import ApprovalRecord
    from subagents.store.approvals import ApprovalRefused
    from subagents.store.postgres import PostgresStore

    ask = ApprovalRecord(
        approval_id="ap1",
        run_id="r1",
        root_run_id="r1",
        agent="worker",
        tool="Bash",
        input={"command": "make"},
        reason="Bash needs approval",
        requester="external",
        tool_use_id="tu1",
        asked_at=1.0,
    )
    alice, bob = PostgresStore(pg_url), PostgresStore(pg_url)
    try:
        alice.save_run(run("r1", status=RunStatus.WAITING))
        alice.save_approval(ask)
        refused: list[str] = []

        def deny() -> None:
            try:
                bob.answer_approval("ap1", False)
            except ApprovalRefused as exc:
                refused.append(str(exc))

        with alice.batch():
            alice.answer_approval("ap1", True)
            other = threading.Thread(target=deny)
            other.start()
            wait_until(lambda: _waits_for_a_row(pg_url), "the second answer waiting")
        other.join(timeout=30)
        assert refused and "was already answered: allowed" in refused[0]
        kept = alice.get_approval("ap1")
        assert kept is not None and kept.status == "allowed"
        assert [c.kind for c in alice.take_commands()] == ["approval"]
    finally:
        alice.close()
        bob.close()


def _waits_for_a_row(url: str) -> bool:
    with _connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            " AND datname = current_database()"
        ).fetchone()
    return bool(row and row[0])


def test_held_in_transaction_names_a_lapsed_lease_whose_row_is_held_not_a_live_one(
    pg_url: str,
) -> None:
    """``held_in_transaction`` (what ``subagents resume`` says of runs left to their host):
    of two hosts whose lease rows a transaction holds ``FOR KEY SHARE`` (each host's fence
    holds its own so while it writes), only the one whose lease lapsed is named. A host that
    renewed its lease is alive, writing: its row was named as held inside a transaction
    still open (as for a host stalled for a minute) when resume happened to look mid-write."""
    import time

    from subagents.store.leases import lease_for
    from subagents.store.postgres import PostgresStore

    store = PostgresStore(pg_url)
    try:
        now = time.time()
        store.acquire_lease(lease_for("stalled", 1.0, started_at=now - 60, now=now - 30))
        store.acquire_lease(lease_for("writing", 3600.0, started_at=now, now=now))
        with _connect(pg_url) as holder:
            holder.execute(f"SET search_path TO {postgres_schema.SCHEMA}")
            with holder.transaction():
                held = holder.execute(
                    "SELECT owner FROM leases ORDER BY owner FOR KEY SHARE"
                ).fetchall()
                assert held == [("stalled",), ("writing",)]
                named = store.held_in_transaction({"stalled", "writing", "gone"})
        assert set(named) == {"stalled"}, named
        assert "pg_stat_activity: pid" in named["stalled"], named
        assert store.held_in_transaction({"stalled", "writing"}) == {}  # let go: none held
    finally:
        store.close()


def test_a_v4_store_with_ended_runs_takes_the_one_end_step(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store of v4 (before "one end per run") with ended runs, one of them given two ends
    then (its record the later writer's): opened by this code, its rows kept as they are;
    then an end over an end is refused, the same end saved again kept, a live run ends."""
    import msgspec

    from subagents.store.base import AlreadyEnded
    from subagents.store.postgres import PostgresStore

    with monkeypatch.context() as m:
        m.setattr(postgres_schema, "MIGRATIONS", postgres_schema.MIGRATIONS[:4])
        m.setattr(postgres_schema, "SCHEMA_VERSION", 4)
        v4 = PostgresStore(pg_url)
        v4.save_run(run("twice", status=RunStatus.COMPLETED, ended_at=2.0))
        v4.save_run(run("twice", status=RunStatus.FAILED, ended_at=3.0))  # (v4 took it)
        v4.save_run(run("live", status=RunStatus.RUNNING))
        v4.close()
    store = PostgresStore(pg_url)
    try:
        assert (store.found_version, store.schema_version) == (4, postgres_schema.SCHEMA_VERSION)
        kept = store.get_run("twice")
        assert kept == run("twice", status=RunStatus.FAILED, ended_at=3.0)
        store.save_run(kept)  # the same end again
        with pytest.raises(AlreadyEnded, match="ended already"):
            store.save_run(msgspec.structs.replace(kept, status=RunStatus.CANCELLED))
        store.save_run(run("live", status=RunStatus.COMPLETED, ended_at=5.0))
        assert store.get_run("twice") == kept
    finally:
        store.close()
