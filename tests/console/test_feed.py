"""The console's feed (console/feed.py) over a real SQLite file that another connection
writes, as another process's runtime would: what a poll sees, and what it sees without any
event (a host that went away)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from subagents.console.feed import StoreFeed
from subagents.messages import Event, EventKind, Lease, RunRecord, RunStatus
from subagents.store.sqlite import SQLiteStore

OWNER = "elsewhere:1:abc"


def _run(run_id: str, status: RunStatus, parent: str | None = None) -> RunRecord:
    return RunRecord(
        run_id=run_id,
        agent="worker",
        task="t",
        root_run_id=parent or run_id,
        parent_run_id=parent,
        depth=1 if parent else 0,
        status=status,
        created_at=time.time(),
        owner=OWNER,
    )


def _write(store: SQLiteStore, record: RunRecord, kind: EventKind) -> None:
    with store.batch():  # a record and its event in one transaction, as the supervisor writes
        store.save_run(record)
        store.append_event(
            Event(kind=kind, run_id=record.run_id, agent="worker", root_run_id=record.root_run_id)
        )


Stores = tuple[SQLiteStore, SQLiteStore, int]


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[Stores]:
    """A writer (another process's runtime: its lease held, as ``OWNER``, at the epoch given)
    and the console's reader, two connections to one SQLite file."""
    path = tmp_path / "runs.sqlite3"
    with SQLiteStore(path) as writer, SQLiteStore(path) as reader:
        lease = Lease(owner=OWNER, host="elsewhere", pid=1, expires_at=time.time() + 600)
        yield writer, reader, writer.acquire_lease(lease)


def test_a_poll_sees_each_changed_run_once_as_it_is_now(stores: Stores) -> None:
    writer, reader, _epoch = stores
    _write(writer, _run("r1", RunStatus.RUNNING), EventKind.STARTED)
    feed = StoreFeed(reader)
    assert feed.load() == 1
    assert feed.index.rows["r1"].status == "running"
    assert feed.poll().rows == []  # nothing since the load
    # a child that starts and ends between two polls is not missed
    _write(writer, _run("r2", RunStatus.RUNNING, parent="r1"), EventKind.STARTED)
    _write(writer, _run("r2", RunStatus.COMPLETED, parent="r1"), EventKind.COMPLETED)
    changes = feed.poll()
    (row,) = changes.rows
    assert (row.id, row.status, row.parent) == ("r2", "completed", "r1")
    assert changes.touched == {"r2"}
    assert [r.id for r in feed.index.children("r1")] == ["r2"]
    assert feed.poll().touched == set()
    # mail delivered changes no row, but the run's page has more to show
    writer.append_event(
        Event(kind=EventKind.MAIL_DELIVERED, run_id="r1", agent="worker", root_run_id="r1")
    )
    changes = feed.poll()
    assert (changes.rows, changes.touched) == ([], {"r1"})


def test_a_run_whose_host_went_away_turns_orphaned_without_an_event(stores: Stores) -> None:
    writer, reader, epoch = stores
    _write(writer, _run("r1", RunStatus.RUNNING), EventKind.STARTED)
    feed = StoreFeed(reader, leases_every_s=0.0)
    feed.load()
    assert feed.poll().rows == []
    writer.release_lease(OWNER, epoch)  # its process ended without ending its run
    (row,) = feed.poll().rows
    assert (row.id, row.status) == ("r1", "orphaned")
    assert feed.poll().rows == []


def test_a_waiting_run_that_ends_says_the_pending_approvals_changed(stores: Stores) -> None:
    # an ask of an ended run is no longer pending, but no approval event says so: the page
    # kept showing it (allow, deny) after its run was stopped or timed out
    writer, reader, _epoch = stores
    _write(writer, _run("r1", RunStatus.WAITING), EventKind.APPROVAL_ASKED)
    _write(writer, _run("r2", RunStatus.RUNNING), EventKind.STARTED)
    feed = StoreFeed(reader)
    feed.load()
    assert not feed.poll().approvals
    _write(writer, _run("r2", RunStatus.COMPLETED), EventKind.COMPLETED)
    assert not feed.poll().approvals  # a run that never waited: nothing to read again
    _write(writer, _run("r1", RunStatus.CANCELLED), EventKind.CANCELLED)
    changes = feed.poll()
    assert changes.approvals and changes.touched == {"r1"}
    assert not feed.poll().approvals
