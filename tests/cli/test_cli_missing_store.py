"""A command that only reads (or posts to) runs already recorded, given a store that is not
there, says so and creates nothing: a mistyped --state used to make the folder and an empty
database, and `ps` then printed "no runs"."""

from __future__ import annotations

from pathlib import Path

import pytest
from clikit import Cli

READING = [
    ("ps",),
    ("ps", "--all", "--json"),
    ("info", "r1"),
    ("tree", "r1"),
    ("log", "r1"),
    ("log", "r1", "--follow"),
    ("wait", "r1"),
    ("attach", "r1"),
    ("stop", "r1"),
    ("stop", "--all"),
    ("send", "r1", "hello"),
    ("resume",),
    ("resume", "--list"),
]


@pytest.fixture(scope="module")
def cli(tmp_path_factory: pytest.TempPathFactory) -> Cli:
    return Cli(tmp_path_factory.mktemp("missing"))


@pytest.mark.parametrize("args", READING, ids=" ".join)
def test_a_missing_state_path_is_an_error_naming_it(cli: Cli, args: tuple[str, ...]) -> None:
    missing = cli.root / "typo" / "runs.sqlite3"
    proc = cli(*args, "--state", str(missing))
    assert proc.returncode == 1, proc.stderr
    assert f"--state {missing}: no run store there" in proc.stderr
    assert proc.stdout == ""
    assert not missing.parent.exists()  # no folder, no database


def test_a_missing_default_store_is_an_error_naming_it(cli: Cli) -> None:
    state_dir = cli.root / "never-used"
    proc = cli("ps", env={"SUBAGENTS_STATE_DIR": str(state_dir)})
    assert proc.returncode == 1, proc.stderr
    assert f"no run store at {state_dir / 'runs.sqlite3'} ($SUBAGENTS_STATE_DIR) yet" in (
        proc.stderr
    )
    assert not state_dir.exists()


def test_an_existing_store_is_read_and_run_creates_one(cli: Cli, tmp_path: Path) -> None:
    state = tmp_path / "new" / "runs.sqlite3"
    ran = cli("run", "quick", "hello", "--agents", str(cli.agents), "--state", str(state))
    assert ran.returncode == 0, ran.stderr
    listed = cli("ps", "--all", "--state", str(state))
    assert listed.returncode == 0, listed.stderr
    assert "quick" in listed.stdout
