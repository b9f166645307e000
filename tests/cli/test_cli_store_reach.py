"""A `subagents run` refused because its store lies in its runs' reach (``StoreInReach``),
or for any other reason (an unknown agent), detached or not, leaves no store behind: what
the command's opening made (the database, its folder, a detached host's log folder) is taken
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


def test_a_refused_detached_run_leaves_nothing_it_made(tmp_path: Path) -> None:
    """Before: `--detach` left `state/new/hosts/` (made for the host's log before it ran)."""
    cli = Cli(tmp_path / "ws")
    before = sorted(p.name for p in cli.root.iterdir())
    state = ["--agents", str(cli.agents), "--state", "state/new/runs.sqlite3"]
    proc = cli("run", "quick", "x", *state, "--detach")
    assert proc.returncode != 0, proc.stdout
    assert "(the workspace)" in proc.stderr, proc.stderr
    assert sorted(p.name for p in cli.root.iterdir()) == before  # no state/ left


@pytest.mark.parametrize("detach", [False, True])
def test_a_run_refused_for_an_unknown_agent_leaves_no_store(tmp_path: Path, detach: bool) -> None:
    """A refusal after the runtime started (the spawn's): its new store holds nothing, and
    goes (before: an empty database was left, and `--detach` its folders too)."""
    cli = Cli(tmp_path / "ws")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    state = ["--state", str(tmp_path / "state" / "runs.sqlite3"), "--workspace", str(elsewhere)]
    proc = cli("run", "nobody", "x", "--agents", str(cli.agents), *state, *(["--detach"] * detach))
    assert proc.returncode == 2, proc.stdout
    assert "unknown agent 'nobody'" in proc.stderr, proc.stderr
    assert not (tmp_path / "state").exists()


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
