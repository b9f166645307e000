"""A listing over a store with one damaged approvals row (its document no longer reads:
hand-edited, written by a tool that knows nothing of the schema).

Session 23 made a damaged runs row and a damaged event cost only themselves (named, the rest
shown: test_cli_damaged_listing.py). A damaged approvals row still costs every listing that
reads approvals: `approvals` (with `--all` too) lists nothing and `ps` shows no run at all,
so a healthy approval that waits for an answer is not shown to the person who could give
it (`approve ID` still answers it, by its full id; by a prefix it fails the same way). So do
``subagents.pending_approvals`` and the console's approvals, which call it. The fix, as
for runs: the approvals listing spares a damaged row (``spare_damaged``;
``list_approvals(damaged=...)`` in every store, the cluster's head too), and the commands
name it on stderr and exit 1. Through the real command in a subprocess, on a real store
file damaged by SQLite itself."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest
from clikit import Cli

from subagents.messages import ApprovalRecord, RunRecord, RunStatus
from subagents.store.sqlite import SQLiteStore

BAD, GOOD = "r1a1000000000badbadbad0", "r1a2000000000goodgood01"


@pytest.fixture
def damaged(tmp_path: Path) -> Cli:
    """Two waiting runs, each with a pending approval; the first approval's row damaged."""
    cli = Cli(tmp_path)
    cli.state.parent.mkdir(parents=True, exist_ok=True)
    now = time.time()
    with SQLiteStore(cli.state) as store:
        for n, run_id in enumerate((BAD, GOOD)):
            store.save_run(
                RunRecord(
                    run_id=run_id, agent="quick", task="t", root_run_id=run_id,
                    status=RunStatus.WAITING, created_at=now + n, owner="gone:1:a",
                )
            )  # fmt: skip
            store.save_approval(
                ApprovalRecord(
                    approval_id=f"ap-{run_id[-4:]}", run_id=run_id, root_run_id=run_id,
                    agent="quick", tool="Bash", input={"command": "ls"}, reason="asked",
                    requester="external", tool_use_id=f"t-{n}", asked_at=now + n,
                )
            )  # fmt: skip
    with sqlite3.connect(cli.state) as db:
        db.execute("UPDATE approvals SET approval = 'not json' WHERE run_id = ?", (BAD,))
    return cli


@pytest.mark.xfail(
    strict=True,
    reason="one damaged approvals row empties the whole listing (e-adv24, session 24):"
    " list_approvals has no damaged= as list_runs has",
)
@pytest.mark.parametrize(
    "args", [("approvals",), ("approvals", "--all"), ("ps",)], ids=["approvals", "all", "ps"]
)
def test_a_damaged_approval_row_costs_only_itself(damaged: Cli, args: tuple[str, ...]) -> None:
    listed = damaged(*args)
    assert listed.returncode == 1, listed.stderr
    assert "cannot read approvals row 'ap-bad0'" in listed.stderr, listed.stderr
    shown = "ap-od01" if args[0] == "approvals" else GOOD[-8:]
    assert shown in listed.stdout, (listed.stdout, listed.stderr)


def test_a_damaged_approval_row_leaves_the_others_answerable(damaged: Cli) -> None:
    """What holds on main: the healthy approval is answered by its id."""
    answered = damaged("approve", "ap-od01")
    assert answered.returncode == 0, answered.stderr
    assert answered.stdout.startswith("allowed ap-od01"), answered.stdout
