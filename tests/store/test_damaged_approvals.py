"""One approvals row whose document no longer reads (hand-edited, written by a tool that knows
nothing of the schema), in each store that keeps approvals as rows: SQLite's file and a
PostgreSQL database (a real throwaway server, ``tests/pgserver.py``). A listing that spares
damage (``list_approvals(damaged=[...])``: `approvals`, `ps`, the console) gets every other
approval and the damaged row named; one that does not (the runtime's own reads) fails naming
it, as before. Before, every listing failed on the one row, so no healthy approval was shown
to the person who could answer it. (The cluster's store: tests/cluster/
test_cluster_damaged_listing.py; the commands: tests/cli/test_cli_damaged_approval.py.)"""

from __future__ import annotations

import contextlib
import sqlite3

import msgspec
import pytest
from storekit import Durable, run

from subagents.messages import ApprovalRecord, RunStatus
from subagents.store.base import DamagedRow
from subagents.store.memory import MemoryStore
from subagents.store.sqlite import SQLiteStore

NOT_A_RECORD = '{"approval_id": 5}'
"""JSON (PostgreSQL's column would take anything; this reads as JSON everywhere) that is no
approval: its id is a number and its other fields are missing."""


def _ask(approval_id: str, run_id: str, at: float) -> ApprovalRecord:
    return ApprovalRecord(
        approval_id=approval_id, run_id=run_id, root_run_id=run_id, agent="worker",
        tool="Bash", input={"command": "make"}, reason="asked", requester="external",
        tool_use_id=f"tu-{run_id}", asked_at=at,
    )  # fmt: skip


def _damage(store: Durable, approval_id: str) -> None:
    """Rewrites the row's document behind the store's back, as a foreign tool would."""
    sql = "UPDATE approvals SET approval = {mark} WHERE approval_id = {mark}"
    if isinstance(store, SQLiteStore):
        with contextlib.closing(sqlite3.connect(store.path)) as conn, conn:
            conn.execute(sql.format(mark="?"), (NOT_A_RECORD, approval_id))
        return
    import psycopg

    from subagents.store.postgres_schema import SCHEMA

    with psycopg.connect(store.url, autocommit=True) as conn:
        conn.execute(f"SET search_path TO {SCHEMA}")
        conn.execute(sql.format(mark="%s"), (NOT_A_RECORD, approval_id))


@pytest.fixture
def damaged_store(durable_store: Durable) -> Durable:
    """Runs r1 and r2 waiting, each with a pending approval; ap1's row damaged."""
    for n, run_id in enumerate(("r1", "r2"), 1):
        durable_store.save_run(run(run_id, status=RunStatus.WAITING))
        durable_store.save_approval(_ask(f"ap{n}", run_id, float(n)))
    _damage(durable_store, "ap1")
    return durable_store


@pytest.mark.parametrize("pending", [True, False], ids=["pending", "all"])
def test_a_sparing_listing_names_the_damaged_approval_and_lists_the_others(
    damaged_store: Durable, pending: bool
) -> None:
    damaged: list[DamagedRow] = []
    listed = damaged_store.list_approvals(pending=pending, damaged=damaged)
    assert [a.approval_id for a in listed] == ["ap2"]
    [only] = damaged
    assert only.key == "ap1"
    assert "cannot read approvals row 'ap1'" in str(only)
    # where it hangs, as its run_id column says (a view of another subtree leaves it out)
    assert (only.table, only.placed, only.parent) == ("approvals", True, "r1")
    mine: list[DamagedRow] = []  # (of another tree: nothing to spare, nothing named)
    assert [a.approval_id for a in damaged_store.list_approvals(run_id="r2", damaged=mine)] == [
        "ap2"
    ]
    assert mine == []


def test_a_damaged_runs_row_is_placed_under_its_parent(durable_store: Durable) -> None:
    """A sparing listing of runs names a damaged runs row with its table and its parent, as
    the row's parent_run_id column says (a view of a subtree then tells whether the row is
    in what it shows: cli/damaged.py ``within``)."""
    durable_store.save_run(run("r1", status=RunStatus.WAITING))
    durable_store.save_run(run("r1-c", root_run_id="r1", parent_run_id="r1", depth=1))
    sql = "UPDATE runs SET record = {mark} WHERE run_id = {mark}"
    if isinstance(durable_store, SQLiteStore):
        with contextlib.closing(sqlite3.connect(durable_store.path)) as conn, conn:
            conn.execute(sql.format(mark="?"), (NOT_A_RECORD, "r1-c"))
    else:
        import psycopg

        from subagents.store.postgres_schema import SCHEMA

        with psycopg.connect(durable_store.url, autocommit=True) as conn:
            conn.execute(f"SET search_path TO {SCHEMA}")
            conn.execute(sql.format(mark="%s"), (NOT_A_RECORD, "r1-c"))
    damaged: list[DamagedRow] = []
    assert [r.run_id for r in durable_store.list_runs(root_run_id="r1", damaged=damaged)] == ["r1"]
    [only] = damaged
    assert (only.key, only.table, only.placed, only.parent) == ("r1-c", "runs", True, "r1")
    assert DamagedRow.from_data(only.as_data()).as_data() == only.as_data()  # (the link's)
    old = DamagedRow.from_data((str(only), "r1-c"))  # (a head of an older release)
    assert (old.key, old.table, old.placed, old.parent) == ("r1-c", None, False, None)


def test_a_listing_that_does_not_spare_fails_naming_the_damaged_row(
    damaged_store: Durable,
) -> None:
    with pytest.raises(DamagedRow, match="cannot read approvals row 'ap1'"):
        damaged_store.list_approvals()
    assert [a.approval_id for a in damaged_store.list_approvals(run_id="r2")] == ["ap2"]


def test_a_memory_store_takes_the_keyword_and_has_nothing_to_name() -> None:
    """Records kept as objects are never damaged: the keyword is the protocol's, unused."""
    store = MemoryStore()
    store.save_run(run("r1", status=RunStatus.WAITING))
    store.save_approval(_ask("ap1", "r1", 1.0))
    damaged: list[DamagedRow] = []
    assert [a.approval_id for a in store.list_approvals(damaged=damaged)] == ["ap1"]
    assert damaged == []


def test_the_superseded_check_names_a_damaged_row_of_its_tree_once(
    durable_store: Durable,
) -> None:
    """A pending ask under an older subagents' id makes the listing read its tree again
    (``superseded_approvals.live``): a damaged row of that tree, named by the listing, is
    not named a second time by that read, nor does that read fail on it."""
    from subagents.store.superseded_approvals import _older_ids, live

    durable_store.save_run(run("r1", status=RunStatus.WAITING))
    asked = _ask("", "r1", 1.0)
    old = msgspec.structs.replace(asked, approval_id=_older_ids(asked)[1])
    durable_store.save_approval(old)
    durable_store.save_approval(msgspec.structs.replace(_ask("ap-bad", "r1", 2.0), tool_use_id="x"))
    _damage(durable_store, "ap-bad")
    damaged: list[DamagedRow] = []
    listed = durable_store.list_approvals(damaged=damaged)
    assert [a.approval_id for a in live(durable_store, listed, damaged)] == [old.approval_id]
    assert [d.key for d in damaged] == ["ap-bad"]
