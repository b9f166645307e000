"""The views of one run's tree over a store with a damaged row (hand-edited: it no longer
reads as its record): `tree`, `info` and `attach` show the healthy part, name each damaged
row on stderr and exit 1, as `ps` and `approvals` do (test_cli_damaged_listing.py). Before,
the one row made each of them a bare error (exit 1, nothing shown): a child's damaged
record hid its whole tree. Through the real command in a subprocess, on a real store file
damaged by SQLite itself (tests/damaged_rows.py)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from clikit import Cli

from damaged_rows import ask, damage_asks, damage_run, run, saved
from subagents.messages import RunStatus

ROOT, BAD = "r1a0000000000rootroot00", "r1a1000000000badbadbad0"
GOOD, GRAND = "r1a2000000000goodgood01", "r1a3000000000grandgran0"


@pytest.fixture
def damaged(tmp_path: Path) -> Cli:
    """A finished root with two children, one of them (BAD) damaged, and BAD's own child
    (GRAND, healthy); GOOD has a pending approval."""
    cli = Cli(tmp_path)
    now = time.time()
    root = run(ROOT, now, agent="lead", status=RunStatus.COMPLETED)
    bad, good = run(BAD, now + 1, parent=root), run(GOOD, now + 2, parent=root)
    grand = run(GRAND, now + 3, parent=bad)
    saved(cli.state, [root, bad, good, grand], [ask(good, 0, now)])
    damage_run(cli.state, BAD)
    return cli


def _names(stderr: str, command: str, row: str = f"runs row '{BAD}'") -> None:
    assert f"subagents {command}: error: " in stderr, stderr
    assert f"cannot read {row}" in stderr and "JSON is malformed" in stderr, stderr
    assert "(left out; the rest is shown)" in stderr and "Traceback" not in stderr, stderr


def test_tree_shows_the_healthy_runs_and_names_the_damaged_one(damaged: Cli) -> None:
    shown = damaged("tree", ROOT)
    assert shown.returncode == 1, shown.stderr
    for run_id in (ROOT, GOOD):
        assert run_id[-8:] in shown.stdout, shown.stdout
    assert BAD[-8:] not in shown.stdout and GRAND[-8:] not in shown.stdout, shown.stdout
    _names(shown.stderr, "tree")
    # the healthy run under the damaged one: named, with the command that shows it
    assert f"run {GRAND} (quick) is under the damaged run {BAD}, not shown" in shown.stderr
    assert f"`subagents tree {GRAND}` shows its subtree" in shown.stderr, shown.stderr
    as_json = damaged("tree", ROOT, "--json")
    assert as_json.returncode == 1, as_json.stderr
    tree = json.loads(as_json.stdout)
    assert tree["run_id"] == ROOT
    assert [(c["run_id"], c["approvals"]) for c in tree["children"]] == [(GOOD, ["ap-od01"])]
    _names(as_json.stderr, "tree")
    below = damaged("tree", GRAND)  # its own subtree: its tree still holds the damaged row
    assert below.returncode == 1 and GRAND[-8:] in below.stdout, (below.stdout, below.stderr)
    _names(below.stderr, "tree")
    assert "shows its subtree" not in below.stderr, below.stderr


def test_info_shows_the_healthy_children_and_names_the_damaged_one(damaged: Cli) -> None:
    shown = damaged("info", ROOT)
    assert shown.returncode == 1, shown.stderr
    assert GOOD in shown.stdout and BAD not in shown.stdout, shown.stdout
    _names(shown.stderr, "info")
    as_json = damaged("info", ROOT, "--json")
    assert as_json.returncode == 1, as_json.stderr
    assert [c["run_id"] for c in json.loads(as_json.stdout)["children"]] == [GOOD]
    _names(as_json.stderr, "info")


def test_info_and_tree_name_a_damaged_approval_and_show_the_rest(damaged: Cli) -> None:
    damage_asks(damaged.state, GOOD)
    shown = damaged("info", GOOD, "--json")
    assert shown.returncode == 1, shown.stderr
    info = json.loads(shown.stdout)
    assert info["run"]["run_id"] == GOOD and info["approvals"] == [], info
    _names(shown.stderr, "info", "approvals row 'ap-od01'")
    tree = damaged("tree", ROOT)
    assert tree.returncode == 1 and GOOD[-8:] in tree.stdout, (tree.stdout, tree.stderr)
    _names(tree.stderr, "tree", "approvals row 'ap-od01'")


def test_attach_follows_the_healthy_runs_and_names_the_damaged_one(damaged: Cli) -> None:
    """On a pipe: one line per run, the end's summary; the damaged row named once; exit 1
    where the finished run alone would exit 0."""
    shown = damaged("attach", ROOT)
    assert shown.returncode == 1, (shown.stdout, shown.stderr)
    assert f"lead {ROOT[-8:]}" in shown.stdout and GOOD[-8:] in shown.stdout, shown.stdout
    assert BAD[-8:] not in shown.stdout, shown.stdout
    _names(shown.stderr, "attach")
    assert shown.stderr.count(f"cannot read runs row '{BAD}'") == 1, shown.stderr  # once


def test_attach_ends_naming_the_damage_when_its_own_run_is_damaged(damaged: Cli) -> None:
    """The watched run's own row damaged while watched: nothing is left to follow, so the
    watch ends with an error naming it (it went on with the record it had, forever)."""
    from subagents.cli.attach_cmd import _subtree
    from subagents.cli.state import CliError
    from subagents.store.sqlite import SQLiteStore

    with SQLiteStore(damaged.state) as store:
        record = store.get_run(GOOD)
        assert record is not None
        assert [r.run_id for r in _subtree(store, record, [])[0]] == [GOOD]
        damage_run(damaged.state, GOOD)
        with pytest.raises(CliError, match=f"cannot read runs row '{GOOD}'"):
            _subtree(store, record, [])
