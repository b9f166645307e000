"""A `subagents run` refused because its store lies in its runs' reach (``StoreInReach``)
leaves no store behind: what the command's opening made (the database, its folder) is taken
back, and a store that was there before, with its runs, stays as it was
(``cli.fresh_store``). The real command in subprocesses, real SQLite files."""

from __future__ import annotations

from pathlib import Path

import pytest
from clikit import Cli

from subagents.store.opening import open_location
from subagents.tools.sandbox_exec import kernel_abi

pytestmark = pytest.mark.skipif(kernel_abi() < 1, reason="no Landlock: the runtime warns instead")


def test_a_refused_run_leaves_neither_its_new_store_nor_its_new_folder(tmp_path: Path) -> None:
    cli = Cli(tmp_path / "ws")
    before = sorted(p.name for p in cli.root.iterdir())
    proc = cli(
        "run", "quick", "x", "--agents", str(cli.agents), "--state", "state/new/runs.sqlite3"
    )
    assert proc.returncode != 0, proc.stdout
    assert "(the workspace)" in proc.stderr, proc.stderr
    assert sorted(p.name for p in cli.root.iterdir()) == before  # no state/ left


def test_a_refused_run_leaves_a_store_that_was_there_as_it_was(tmp_path: Path) -> None:
    cli = Cli(tmp_path / "ws")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    state = ["--agents", str(cli.agents), "--state", "state/runs.sqlite3"]
    kept = cli("run", "quick", "kept", *state, "--workspace", str(elsewhere))  # out of reach
    assert kept.returncode == 0, kept.stderr
    files = sorted(p.name for p in (cli.root / "state").iterdir())
    proc = cli("run", "quick", "x", *state)
    assert proc.returncode != 0, proc.stdout
    assert "(the workspace)" in proc.stderr, proc.stderr
    assert sorted(p.name for p in (cli.root / "state").iterdir()) == files
    with open_location(cli.root / "state" / "runs.sqlite3") as store:
        assert [r.task for r in store.list_runs()] == ["kept"]
