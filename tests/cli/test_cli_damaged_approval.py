"""A listing over a store with one damaged approvals row (its document no longer reads:
hand-edited, written by a tool that knows nothing of the schema).

Session 23 made a damaged runs row and a damaged event cost only themselves (named, the rest
shown: test_cli_damaged_listing.py). A damaged approvals row still costs every listing that
reads approvals: `approvals` (with `--all` too) lists nothing and `ps` shows no run at all,
so a healthy approval that waits for an answer is not shown to the person who could give
it (`approve ID` still answers it, by its full id; by a prefix it failed the same way). So
did ``subagents.pending_approvals`` and the console's approvals, which call it. The fix, as
for runs: the approvals listing spares a damaged row (``store.approvals.listing_of``;
``list_approvals(damaged=...)`` in every store, the cluster's head too), and the commands
name it on stderr and exit 1. Through the real command in a subprocess, on a real store
file damaged by SQLite itself (the stores' own cases: tests/store/test_damaged_approvals.py,
tests/cluster/test_cluster_damaged_listing.py)."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest
from clikit import Cli

from damaged_rows import ask, damage_asks, run, saved

BAD, GOOD = "r1a1000000000badbadbad0", "r1a2000000000goodgood01"


@pytest.fixture
def damaged(tmp_path: Path) -> Cli:
    """Two waiting runs, each with a pending approval; the first approval's row damaged."""
    cli = Cli(tmp_path)
    now = time.time()
    bad, good = run(BAD, now), run(GOOD, now + 1)
    saved(cli.state, [bad, good], [ask(bad, 0, now), ask(good, 1, now + 1)])
    damage_asks(cli.state, BAD)
    return cli


@pytest.mark.parametrize(
    "args",
    [("approvals",), ("approvals", "--all"), ("approvals", "--json"), ("ps",), ("ps", "--json")],
    ids=["approvals", "all", "json", "ps", "ps-json"],
)
def test_a_damaged_approval_row_costs_only_itself(damaged: Cli, args: tuple[str, ...]) -> None:
    listed = damaged(*args)
    assert listed.returncode == 1, listed.stderr
    assert "cannot read approvals row 'ap-bad0'" in listed.stderr, listed.stderr
    shown = "ap-od01" if args[0] == "approvals" else GOOD[-8:]
    assert shown in listed.stdout, (listed.stdout, listed.stderr)
    assert listed.stderr.count("ap-bad0") == 1, listed.stderr  # named once
    if args[0] == "ps":  # the healthy run's approval still marked: the asks were read
        assert "ap-od01" in listed.stdout, listed.stdout


def test_a_damaged_approval_row_leaves_a_prefix_answerable(damaged: Cli) -> None:
    """A prefix is matched against every approval, the damaged one's id too: a prefix that
    names only a healthy one answers it; one shared with the damaged row is ambiguous; one
    that names only the damaged row is refused naming the damage."""
    answered = damaged("approve", "ap-od")
    assert answered.returncode == 0, answered.stderr
    assert answered.stdout.startswith("allowed ap-od01"), answered.stdout
    shared = damaged("deny", "ap-")
    assert shared.returncode == 1, shared.stderr
    assert "'ap-' names 2 approvals" in shared.stderr, shared.stderr
    bad = damaged("approve", "ap-ba")
    assert bad.returncode == 1, bad.stderr
    assert "cannot read approvals row 'ap-bad0'" in bad.stderr, bad.stderr


def test_pending_approvals_spares_a_damaged_row_when_asked_to(damaged: Cli) -> None:
    """``subagents.pending_approvals`` (the console's): with ``damaged`` the healthy one is
    listed and the damaged one named there; without, the damage is its error, naming it."""
    from subagents import pending_approvals
    from subagents.store.base import DamagedRow

    named: list[DamagedRow] = []
    listed = pending_approvals(damaged.state, damaged=named)
    assert [a.approval_id for a in listed] == ["ap-od01"]
    assert [d.key for d in named] == ["ap-bad0"]
    assert [a.approval_id for a in pending_approvals(damaged.state, GOOD, damaged=[])] == [
        "ap-od01"
    ]
    with pytest.raises(DamagedRow, match="cannot read approvals row 'ap-bad0'"):
        pending_approvals(damaged.state)


def test_a_damaged_approval_row_leaves_the_others_answerable(damaged: Cli) -> None:
    """What holds on main: the healthy approval is answered by its id."""
    answered = damaged("approve", "ap-od01")
    assert answered.returncode == 0, answered.stderr
    assert answered.stdout.startswith("allowed ap-od01"), answered.stdout


@pytest.mark.parametrize("verb", ["approve", "deny"])
def test_answering_a_damaged_row_by_its_full_id_names_it_and_changes_nothing(
    damaged: Cli, verb: str
) -> None:
    """The damaged row's whole id (no prefix match: ``get_approval`` reads it first): a
    clear error naming the row and its damage, exit 1; its row, its run and the commands
    table are as they were, and the healthy approval still waits."""
    before = _rows(damaged)
    answered = damaged(verb, "ap-bad0", "--reason", "r")
    assert answered.returncode == 1, (answered.stdout, answered.stderr)
    assert "cannot read approvals row 'ap-bad0'" in answered.stderr, answered.stderr
    assert "Traceback" not in answered.stderr, answered.stderr
    assert answered.stdout == "", answered.stdout
    assert _rows(damaged) == before
    waiting = damaged("approvals", "--json")
    assert "ap-od01" in waiting.stdout, waiting.stdout


def _rows(cli: Cli) -> tuple[object, ...]:
    """What answering may change: the approvals rows, the runs rows, the commands posted."""
    with sqlite3.connect(cli.state) as db:
        return tuple(
            db.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall()
            for table in ("approvals", "runs", "commands")
        )
