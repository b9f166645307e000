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

    old = PostgresStore(pg_url)
    old.save_run(run("r1", status=RunStatus.RUNNING))
    old.close()
    step = ("approvals", ("CREATE TABLE approvals (run_id text PRIMARY KEY, request text)",))
    monkeypatch.setattr(postgres_schema, "MIGRATIONS", (*postgres_schema.MIGRATIONS, step))
    monkeypatch.setattr(postgres_schema, "SCHEMA_VERSION", postgres_schema.SCHEMA_VERSION + 1)
    new = PostgresStore(pg_url)
    assert (new.found_version, new.schema_version) == (1, 2)
    assert new.meta()["schema_version"] == "2"
    assert new.get_run("r1") == run("r1", status=RunStatus.RUNNING)
    new.close()
    assert "approvals" in _tables(pg_url)


def test_a_newer_or_foreign_schema_is_refused_untouched(pg_url: str) -> None:
    from subagents.store.postgres import PostgresStore

    PostgresStore(pg_url).close()
    with _connect(pg_url) as conn:
        conn.execute("UPDATE subagents.meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(StoreError, match=r"schema version 99, newer than this code's 1"):
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
