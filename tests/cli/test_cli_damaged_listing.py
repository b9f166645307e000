"""A listing over a store with one damaged runs row (its record no longer reads: hand-edited,
written by a tool that knows nothing of the schema): `ps` and `approvals` show every other
run, name the damaged one on stderr (its run id, what is wrong) and exit 1 (docs/cli.md).
Before, the one row made the whole listing an error: no run shown at all. Through the real
command in a subprocess, on a real store file damaged by SQLite itself."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from clikit import Cli

from damaged_rows import ask, damage_run, run, saved

BAD, GOOD = "r1a1000000000badbadbad0", "r1a2000000000goodgood01"


@pytest.fixture
def damaged(tmp_path: Path) -> Cli:
    """Two live runs, each with a pending approval; the first run's record damaged."""
    cli = Cli(tmp_path)
    now = time.time()
    bad, good = run(BAD, now), run(GOOD, now + 1)
    saved(cli.state, [bad, good], [ask(bad, 0, now), ask(good, 1, now)])
    damage_run(cli.state, BAD)
    return cli


def _names_the_damaged_row(stderr: str, command: str) -> None:
    assert f"subagents {command}: error: " in stderr, stderr
    assert f"cannot read runs row '{BAD}'" in stderr and "JSON is malformed" in stderr, stderr
    assert "Traceback" not in stderr


@pytest.mark.parametrize("args", [(), ("--all",)], ids=["live", "all"])
def test_ps_shows_the_other_runs_and_names_the_damaged_one(
    damaged: Cli, args: tuple[str, ...]
) -> None:
    listed = damaged("ps", *args)
    assert listed.returncode == 1, listed.stderr
    assert GOOD[-8:] in listed.stdout and BAD[-8:] not in listed.stdout, listed.stdout
    _names_the_damaged_row(listed.stderr, "ps")
    as_json = damaged("ps", "--json", *args)
    assert as_json.returncode == 1, as_json.stderr
    assert [row["run_id"] for row in json.loads(as_json.stdout)] == [GOOD]
    _names_the_damaged_row(as_json.stderr, "ps")


def test_approvals_shows_every_approval_and_names_the_damaged_run(damaged: Cli) -> None:
    """The damaged run's approval is a row of its own, readable: it is shown too (the
    person may answer it); only whether its host lives is unknown."""
    listed = damaged("approvals", "--json")
    assert listed.returncode == 1, listed.stderr
    rows = json.loads(listed.stdout)
    assert sorted(row["run_id"] for row in rows) == [BAD, GOOD], rows
    _names_the_damaged_row(listed.stderr, "approvals")
    shown = damaged("approvals")
    assert shown.returncode == 1 and "ap-bad0" in shown.stdout and "ap-od01" in shown.stdout
    _names_the_damaged_row(shown.stderr, "approvals")
