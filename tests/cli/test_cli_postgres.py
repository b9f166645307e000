"""Every command on a PostgreSQL store: ``--state postgresql://...`` or ``$SUBAGENTS_STATE``
(the multi-process tests run on both stores: tests/cli/test_cli_processes.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from clikit import Cli

from subagents.store.postgres_schema import SCHEMA

pytestmark = pytest.mark.usefixtures("pg_server")  # skipped saying why without one (CI: failed)


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path)


def _has_store(url: str) -> bool:
    import psycopg

    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (SCHEMA,)).fetchone()
    return row is not None


def test_a_database_without_a_store_is_named_and_left_untouched(cli: Cli, pg_url: str) -> None:
    proc = cli("ps", "--state", pg_url)
    assert proc.returncode == 1, proc.stderr
    assert f"{pg_url}: no run store in this database yet" in proc.stderr
    assert not _has_store(pg_url)


def test_run_records_in_the_database_and_every_command_reads_it(cli: Cli, pg_url: str) -> None:
    ran = cli("run", "quick", "hello", "--agents", str(cli.agents), "--state", pg_url, "--json")
    assert ran.returncode == 0, ran.stderr
    rows = cli.json("ps", "--all", "--state", pg_url)
    assert [(r["agent"], r["status"]) for r in rows] == [("quick", "completed")]
    # $SUBAGENTS_STATE names it as --state does, for every command
    env = {"SUBAGENTS_STATE": pg_url}
    listed = cli("ps", "--all", env=env)
    assert listed.returncode == 0, listed.stderr
    assert "quick" in listed.stdout
    info = cli("info", "#1", "--json", env=env)  # the listing just printed, remembered
    assert info.returncode == 0, info.stderr
    assert rows[0]["run_id"] in info.stdout
    # and nothing was written to the SQLite file of the state directory
    assert not cli.state.exists()


def test_an_unreachable_database_is_a_clear_error_without_its_password(cli: Cli) -> None:
    url = "postgresql://someone:s3cret@127.0.0.1:9/nowhere"
    proc = cli("ps", "--state", url)
    assert proc.returncode == 1
    assert "postgresql://someone:***@127.0.0.1:9/nowhere: connecting to the database" in (
        proc.stderr
    )
    assert "the database is unreachable" in proc.stderr
    assert "s3cret" not in proc.stderr
