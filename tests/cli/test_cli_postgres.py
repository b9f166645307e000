"""Every command on a PostgreSQL store: ``--state postgresql://...`` or ``$SUBAGENTS_STATE``
(the multi-process tests run on both stores: tests/cli/test_cli_processes.py)."""

from __future__ import annotations

from argparse import Namespace
from pathlib import Path

import msgspec
import pytest
from clikit import Cli

from polling import wait_until
from subagents.cli.runtime_args import cluster_from
from subagents.cli.state import CliError
from subagents.store.locations import redacted
from subagents.store.postgres_schema import SCHEMA


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
    assert f"{redacted(pg_url)}: no run store in this database yet" in proc.stderr
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


@pytest.mark.usefixtures("pg_server")  # psycopg, at least: skipped saying why without it
def test_an_unreachable_database_is_a_clear_error_without_its_password(cli: Cli) -> None:
    url = "postgresql://someone:s3cret@127.0.0.1:9/nowhere"
    proc = cli("ps", "--state", url)
    assert proc.returncode == 1
    assert "postgresql://someone:***@127.0.0.1:9/nowhere: connecting to the database" in (
        proc.stderr
    )
    assert "the database is unreachable" in proc.stderr
    assert "s3cret" not in proc.stderr


def test_a_database_goes_with_ray_a_file_does_not() -> None:
    """On a cluster the store may be a database (the driver writes it directly); a file
    with --ray is two stores."""
    ray = "10.0.0.5:6379"
    assert cluster_from(Namespace(ray=ray, state="postgresql://u@db:5432/runs")) == ray
    with pytest.raises(CliError, match="two stores"):
        cluster_from(Namespace(ray=ray, state=Path("runs.sqlite3")))


def test_detach_on_a_cluster_with_a_database_is_refused_by_name(cli: Cli) -> None:
    url = "postgresql://u@127.0.0.1:9/runs"
    proc = cli(
        "run",
        "quick",
        "x",
        "--agents",
        str(cli.agents),
        "--detach",
        "--ray",
        "10.0.0.5:6379",
        "--state",
        url,
    )
    assert proc.returncode == 2, proc.stderr
    assert "--detach on a Ray cluster records in the cluster's store" in proc.stderr


def test_a_detached_run_on_the_database_is_waited_for_from_another_process(
    cli: Cli, pg_url: str
) -> None:
    env = {"SUBAGENTS_STATE": pg_url}
    proc = cli("run", "--detach", "quick", "bg", "--agents", str(cli.agents), "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    data = msgspec.json.decode(proc.stdout)
    waited = cli("wait", data["run_id"], env=env)
    assert waited.returncode == 0, waited.stderr
    assert waited.stdout.startswith(f"{data['run_id']} completed: quick answer to bg")
    # the host's log is kept on this machine, in the database's own folder
    log = Path(data["log"])
    assert log.parent.parent.parent == cli.state.parent / "databases"
    wait_until(lambda: "quick answer to bg" in log.read_text(), "the host's log complete")


def test_events_reads_the_databases_feed_of_every_run(cli: Cli, pg_url: str) -> None:
    """`subagents events` follows ``events_after`` (every run's events in one order) on a
    database as on a file."""
    env = {"SUBAGENTS_STATE": pg_url}
    for task in ("one", "two"):
        ran = cli("run", "quick", task, "--agents", str(cli.agents), env=env)
        assert ran.returncode == 0, ran.stderr
    proc = cli("events", "--since", "1h", "--no-follow", "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    events = [msgspec.json.decode(line)["event"] for line in proc.stdout.splitlines()]
    runs = list(dict.fromkeys(e["run_id"] for e in events))
    assert len(runs) == 2
    for run_id in runs:  # each run's events whole and in order, the first run's first
        kinds = [e["kind"] for e in events if e["run_id"] == run_id]
        assert kinds[-1] == "completed", kinds
    assert events[-1]["run_id"] == runs[1]
