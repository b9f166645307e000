"""The views of one run's tree over a store with a damaged row (hand-edited: it no longer
reads as its record): `tree`, `info` and `attach` show the healthy part, name each damaged
row on stderr and exit 1, as `ps` and `approvals` do (test_cli_damaged_listing.py). Before,
the one row made each of them a bare error (exit 1, nothing shown): a child's damaged
record hid its whole tree. Through the real command in a subprocess, on a real store file
damaged by SQLite itself (tests/damaged_rows.py)."""

from __future__ import annotations

import json
import sqlite3
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
    below = damaged("tree", GRAND)  # its own subtree: the damaged row is above it, not shown
    assert below.returncode == 0 and GRAND[-8:] in below.stdout, (below.stdout, below.stderr)
    assert below.stderr == "", below.stderr


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
    # the healthy run cut off under the damaged one (not reached through its parent): named
    # once, with the command that shows it (it was followed by nothing and said nowhere)
    cut = f"run {GRAND} (quick) is under the damaged run {BAD}, not shown"
    assert shown.stderr.count(cut) == 1, shown.stderr


def test_attach_ends_naming_the_damage_when_its_own_run_is_damaged(damaged: Cli) -> None:
    """The watched run's own row damaged while watched: nothing is left to follow, so the
    watch ends with an error naming it (it went on with the record it had, forever)."""
    from subagents.cli.attach_cmd import _subtree
    from subagents.cli.damaged import Sighted
    from subagents.cli.state import CliError
    from subagents.store.sqlite import SQLiteStore

    with SQLiteStore(damaged.state) as store:
        record = store.get_run(GOOD)
        assert record is not None
        assert [r.run_id for r in _subtree(store, record, Sighted("attach"))[0]] == [GOOD]
        damage_run(damaged.state, GOOD)
        with pytest.raises(CliError, match=f"cannot read runs row '{GOOD}'"):
            _subtree(store, record, Sighted("attach"))


MID, UNDER, LEAF, OTHER = (
    "r1b1000000000midmidmid0", "r1b2000000000underund00", "r1b3000000000leafleaf0",
    "r1b4000000000otherothe0",
)  # fmt: skip


@pytest.fixture
def deep(tmp_path: Path) -> Cli:
    """ROOT with two children, MID and OTHER (OTHER has a pending approval); MID's child
    UNDER is damaged, and UNDER's child LEAF is healthy."""
    cli = Cli(tmp_path)
    now = time.time()
    root = run(ROOT, now, agent="lead", status=RunStatus.COMPLETED)
    mid, other = run(MID, now + 1, parent=root), run(OTHER, now + 2, parent=root)
    under = run(UNDER, now + 3, parent=mid, status=RunStatus.COMPLETED)
    leaf = run(LEAF, now + 4, parent=under, status=RunStatus.COMPLETED)
    saved(cli.state, [root, mid, other, under, leaf], [ask(other, 0, now)])
    damage_run(cli.state, UNDER)
    return cli


def test_a_view_of_a_subtree_fails_only_for_the_damage_in_it(deep: Cli) -> None:
    """`tree`/`info` of a non-root run exited 1 for a damaged row anywhere in its tree: the
    store now says where a damaged row hangs (its parent_run_id column reads), so a view
    names, and fails for, only the damage in what it shows."""
    for command in ("tree", "info"):
        beside = deep(command, OTHER)  # UNDER is in MID's subtree, not OTHER's
        assert beside.returncode == 0, (command, beside.stdout, beside.stderr)
        assert beside.stderr == "" and OTHER[-8:] in beside.stdout, beside
    mid = deep("tree", MID)
    assert mid.returncode == 1 and MID[-8:] in mid.stdout, (mid.stdout, mid.stderr)
    _names(mid.stderr, "tree", f"runs row '{UNDER}'")
    assert f"run {LEAF} (quick) is under the damaged run {UNDER}, not shown" in mid.stderr
    info = deep("info", MID)  # UNDER is its child: in what it shows
    assert info.returncode == 1, (info.stdout, info.stderr)
    _names(info.stderr, "info", f"runs row '{UNDER}'")
    root = deep("info", ROOT)  # UNDER is a grandchild: `info` lists the children only
    assert root.returncode == 0 and root.stderr == "", (root.stdout, root.stderr)
    assert MID in root.stdout and OTHER in root.stdout, root.stdout


def test_a_damaged_approval_fails_only_the_views_of_its_run(deep: Cli) -> None:
    """The approvals row's run_id column places it: a view of another subtree is whole."""
    damage_asks(deep.state, OTHER)
    for command in ("tree", "info"):
        beside = deep(command, LEAF)
        assert beside.returncode == 0 and beside.stderr == "", (command, beside.stderr)
        own = deep(command, OTHER)
        assert own.returncode == 1, (command, own.stdout, own.stderr)
        _names(own.stderr, command, f"approvals row 'ap-{OTHER[-4:]}'")


def test_a_damaged_row_whose_place_does_not_read_fails_every_view_of_its_tree(deep: Cli) -> None:
    """A damaged runs row whose parent_run_id column does not read as a run id either (a
    blob, hand-edited) may be anywhere in its tree: a view cannot say it shows its subtree
    whole, so it names the row and exits 1 (the decision: an unknown place counts as in)."""
    with sqlite3.connect(deep.state) as db:
        db.execute("UPDATE runs SET parent_run_id = x'00ff' WHERE run_id = ?", (UNDER,))
    for command in ("tree", "info"):
        beside = deep(command, OTHER)
        assert beside.returncode == 1, (command, beside.stdout, beside.stderr)
        _names(beside.stderr, command, f"runs row '{UNDER}'")


def test_attach_of_a_subtree_names_only_its_damage_and_the_runs_cut_off(deep: Cli) -> None:
    """`attach MID` (on a pipe): UNDER named once, LEAF named once as cut off under it;
    `attach OTHER`: nothing of MID's subtree named, exit 0 (it was 1 for damage it did not
    follow)."""
    mid = deep("attach", MID)  # (its host is gone: one pass, then exit 6, orphaned)
    assert mid.returncode == 6 and f"quick {MID[-8:]}" in mid.stdout, (mid.stdout, mid.stderr)
    assert mid.stderr.count(f"cannot read runs row '{UNDER}'") == 1, mid.stderr
    cut = f"run {LEAF} (quick) is under the damaged run {UNDER}, not shown"
    assert mid.stderr.count(cut) == 1, mid.stderr
    other = deep("attach", OTHER)
    assert other.returncode == 6 and f"quick {OTHER[-8:]}" in other.stdout, other.stdout
    assert "cannot read" not in other.stderr and "damaged" not in other.stderr, other.stderr


def test_a_damaged_non_root_row_whose_parent_reads_empty_is_not_taken_for_a_root(
    deep: Cli,
) -> None:
    """UNDER's parent_run_id column hand-emptied too (NULL): it reads, but says a root, and
    UNDER is not its tree's root: its place is unknown. It was placed as a root, so no
    view under ROOT named it, `tree ROOT` exited 0 and LEAF (cut off under it) was in no
    view and named nowhere; it now counts as unplaced: every view of the tree names it."""
    with sqlite3.connect(deep.state) as db:
        db.execute("UPDATE runs SET parent_run_id = NULL WHERE run_id = ?", (UNDER,))
    for target in (ROOT, MID):
        shown = deep("tree", target)
        assert shown.returncode == 1, (target, shown.stdout, shown.stderr)
        _names(shown.stderr, "tree", f"runs row '{UNDER}'")
        assert f"run {LEAF} (quick) is under the damaged run {UNDER}, not shown" in shown.stderr
    info = deep("info", MID)  # (it may be MID's child)
    assert info.returncode == 1, (info.stdout, info.stderr)
    _names(info.stderr, "info", f"runs row '{UNDER}'")
