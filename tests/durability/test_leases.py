"""Leases: runtimes sharing a store keep to their own runs while alive, and a runtime whose
lease lapsed loses its runs to the next one (a dead process's runs are taken up: see
test_crash_recovery and tests/cli/test_cli_leases.py for SIGKILL across processes)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest

from polling import wait_until
from subagents import AgentSpec, Runtime, ScriptedModel, SQLiteStore
from subagents.messages import Lease, RunRecord, RunStatus
from subagents.store import lease_fences
from subagents.store.leases import (
    Liveness,
    alive,
    describe_owner,
    lease_for,
    lease_seconds,
    live_owners,
    machine_id,
    restartable_host,
)

SLOW = ScriptedModel({"slow": [{"text": "done {task}", "delay": 30}]})
AGENTS = [AgentSpec(name="slow", description="takes its time")]


def _dead_pid() -> int:
    """The pid of a process that has ended (and been reaped)."""
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], check=True,
                          capture_output=True, text=True)  # fmt: skip
    return int(proc.stdout)


def test_a_lease_lives_until_it_expires_and_a_dead_local_process_at_once() -> None:
    now = 1_000.0
    mine = lease_for("me", 15.0, started_at=now, now=now)
    assert mine.pid == os.getpid() and mine.machine == machine_id()
    # on this machine by the boot clock, whose reading is offset as ``now`` is from the wall
    # clock: the real time between ``lease_for`` and ``alive`` adds to it (a loaded machine
    # descheduled this test >0.1 s between the two: 14.9 read lapsed): a margin of seconds
    assert alive(mine, now + 10.0)
    # lapsed: no renewal within lease_s. Seconds past the edge too: the two clocks are read
    # one after the other in ``lease_for`` and again in ``alive``, and a thread descheduled
    # between the two readings moves the edge by as long (1 ms past it read alive, loaded)
    assert not alive(mine, now + 20.0)
    gone = Lease(owner="x", host="h", pid=_dead_pid(), machine=machine_id(), expires_at=now + 15)
    assert not alive(gone, now)  # on this machine a dead process is seen before expiry
    far = Lease(
        owner="y", host="far", pid=_dead_pid(), machine="another machine", expires_at=now + 15
    )
    assert alive(far, now)  # elsewhere, only time tells: the wall clock's, to the edge
    assert alive(far, now + 14.999)
    assert not alive(far, now + 15.0)
    assert live_owners([mine, gone, far], now) == {"me", "y"}


def test_liveness_says_which_unfinished_runs_are_orphaned_and_who_hosted_them() -> None:
    now = 1_000.0
    live = Lease(
        owner="a:1:x", host="a", pid=1, machine="m2", renewed_at=now - 2, expires_at=now + 13
    )
    lapsed = Lease(
        owner="b:2:y", host="b", pid=2, machine="m2", renewed_at=now - 40, expires_at=now - 25
    )
    view = Liveness([live, lapsed], now)

    def record(owner: str | None, status: RunStatus = RunStatus.RUNNING) -> RunRecord:
        return RunRecord(
            run_id="r", agent="a", task="t", root_run_id="r", owner=owner, status=status
        )

    assert not view.orphaned(record("a:1:x"))
    assert view.orphaned(record("b:2:y"))
    assert view.orphaned(record("c:3:z"))  # no lease at all: its runtime ended or never wrote one
    assert not view.orphaned(record("b:2:y", RunStatus.COMPLETED))  # ended runs are not orphans
    assert view.describe(record("a:1:x")) == "a pid 1, lease renewed 2s ago"
    assert view.describe(record("b:2:y")) == "b pid 2, whose lease lapsed 25s ago"
    assert view.describe(record("c:3:z")) == "c pid 3, no lease (its runtime has ended)"
    assert describe_owner(None) == "no host"


def test_a_restartable_host_still_listed_is_restarting_not_orphaned() -> None:
    """A detached tree's host (an owner ``host:pid:nonce:NAME``) whose process died while
    its cluster still lists NAME is being started again: ``restarting``; once it is no
    longer listed, or for a plain process's run, orphaned as before. Each name asked once."""
    now = 1000.0
    dead = Lease(owner="h:7:n:subagents-tree-ab", host="h", pid=7, machine="m2", expires_at=now - 5)
    asked: list[str] = []

    def listed(name: str) -> bool:
        asked.append(name)
        return name == "subagents-tree-ab"

    view = Liveness([dead], now, listed=listed)

    def record(owner: str, status: RunStatus = RunStatus.RUNNING) -> RunRecord:
        return RunRecord(
            run_id="r", agent="a", task="t", root_run_id="r", owner=owner, status=status
        )

    restarting = record("h:7:n:subagents-tree-ab")
    assert view.restarting(restarting) and not view.orphaned(restarting)
    assert view.describe(restarting) == (
        "h pid 7 (subagents-tree-ab), gone; its host is being started again"
    )
    gone = record("h:8:n:subagents-tree-cd")  # its host no longer listed: Ray gave up
    assert view.orphaned(gone) and not view.restarting(gone)
    plain = record("h:9:n")  # a plain process: nothing restarts it
    assert view.orphaned(plain) and not view.restarting(plain)
    assert not view.restarting(record("h:7:n:subagents-tree-ab", RunStatus.COMPLETED))
    assert view.restarting(restarting)
    assert asked == ["subagents-tree-ab", "subagents-tree-cd"]
    local = Liveness([dead], now)  # a store nobody can ask about its hosts: as before
    assert local.orphaned(restarting) and not local.restarting(restarting)
    assert restartable_host("h:7:n:subagents-tree-ab") == "subagents-tree-ab"
    assert restartable_host("h:7:n") is None and restartable_host(None) is None


def test_the_lease_setting_is_checked_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    assert lease_seconds(2) == 2.0
    monkeypatch.setenv("SUBAGENTS_LEASE_S", "3.5")
    assert lease_seconds() == 3.5
    monkeypatch.setenv("SUBAGENTS_LEASE_S", "soon")
    with pytest.raises(
        ValueError, match="SUBAGENTS_LEASE_S must be a number of seconds, got 'soon'"
    ):
        lease_seconds()
    with pytest.raises(ValueError, match="lease_s must be a positive number of seconds, got 0"):
        Runtime(AGENTS, model=SLOW, lease_s=0)


def test_a_runtime_holds_a_lease_while_open_and_releases_it_on_close(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    with Runtime(AGENTS, model=SLOW, store=store, lease_s=0.3) as rt:
        [lease] = store.leases()
        assert lease.owner == rt.owner and lease.pid == os.getpid()
        first = lease.renewed_at
        wait_until(lambda: store.leases()[0].renewed_at != first, "the keeper's next renewal")
        assert store.leases()[0].renewed_at > first  # renewed by its keeper
    assert store.leases() == []
    store.close()


def test_a_second_runtime_leaves_a_live_runtimes_runs_and_commands_alone(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    first = Runtime(AGENTS, model=SLOW, store=SQLiteStore(db), command_poll_s=0.05)
    started = threading.Event()
    first.subscribe(lambda e: started.set() if e.kind == "started" else None)
    try:
        handle = first.spawn("slow", "a")
        assert started.wait(60)
        second_store = SQLiteStore(db)
        with Runtime(AGENTS, model=SLOW, store=second_store, command_poll_s=0.05) as second:
            assert second.restore_report.resumed == []
            assert handle.run_id in second.restore_report.elsewhere
            # a stop posted for the first runtime's run is not taken by the second one
            second_store.post_command("stop", handle.run_id)
            outcome = handle.result(timeout=60)
            assert outcome.status is RunStatus.CANCELLED
            assert outcome.error == "stopped from another process"
        second_store.close()
    finally:
        first.close()


def _orphan(db: Path, owner: str, lease: Lease | None) -> str:
    """A tree hosted by ``owner`` (a runtime of another machine), with its lease as given."""
    store = SQLiteStore(db)
    run_id = "r-orphan"
    store.save_run(
        RunRecord(
            run_id=run_id, agent="quick", task="t", root_run_id=run_id, status=RunStatus.RUNNING,
            created_at=time.time(), started_at=time.time(), owner=owner,
        )
    )  # fmt: skip
    if lease is not None:
        store.acquire_lease(lease)
    store.close()
    return run_id


QUICK = ScriptedModel({"quick": [{"text": "quick {task}"}]})
QUICK_AGENTS = [AgentSpec(name="quick", description="answers")]


def test_runs_of_a_lapsed_lease_are_taken_over_and_that_lease_released(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    owner = "far-host:4242:abcd"
    lapsed = Lease(owner=owner, host="far-host", pid=4242, machine="another machine",
                   renewed_at=time.time() - 60, expires_at=time.time() - 45)  # fmt: skip
    run_id = _orphan(db, owner, lapsed)
    store = SQLiteStore(db)
    with Runtime(QUICK_AGENTS, model=QUICK, store=store) as rt:
        assert rt.restore_report.resumed == [run_id]
        assert rt.restore_report.taken_from == [owner]
        assert [lease.owner for lease in store.leases()] == [rt.owner]  # the lapsed one is gone
        assert rt.attach(run_id).result(timeout=60).result == "quick t"
        assert store.get_run(run_id).owner == rt.owner  # type: ignore[union-attr]
    store.close()


def test_a_crashed_runtimes_fence_view_is_dropped_at_the_next_start(tmp_path: Path) -> None:
    """A runtime that crashed holding its lease with no run to take over: its lapsed
    lease's fence view (SQLite v17) is dropped when the next runtime starts, which runs
    and closes as ever; the lease row stays (its owner named, lapsed) for `subagents stop`:
    a lease of another machine may be a stalled host's (only time tells there)."""
    db = tmp_path / "runs.db"
    owner = "far-host:4242:abcd"
    lapsed = Lease(owner=owner, host="far-host", pid=4242, machine="another machine",
                   renewed_at=time.time() - 60, expires_at=time.time() - 45)  # fmt: skip
    with SQLiteStore(db) as crashed:
        crashed_epoch = crashed.acquire_lease(lapsed)
    assert _fence_views(db) == {lease_fences.view_of(crashed_epoch)}
    store = SQLiteStore(db)
    with Runtime(QUICK_AGENTS, model=QUICK, store=store) as rt:
        assert rt.restore_report.taken_from == []
        (mine,) = [lease.epoch for lease in store.leases() if lease.owner == rt.owner]
        assert mine is not None
        assert _fence_views(db) == {lease_fences.view_of(mine)}
        assert rt.spawn("quick", "t").result(timeout=60).result == "quick t"
    assert _fence_views(db) == set()
    assert [lease.owner for lease in store.leases()] == [owner]
    store.close()


def _lapsed_here(owner: str, pid: int, renewed_ago: float = 60.0) -> Lease:
    """A lease of this machine (boot clock and all) for ``pid``, renewed ``renewed_ago``
    seconds ago, 15 s long (a tiny lease when renewed now: lapsed at once)."""
    then = time.time() - renewed_ago
    lease = lease_for(owner, 15.0 if renewed_ago else 0.001, started_at=then, now=then)
    return msgspec.structs.replace(lease, pid=pid)


def test_a_crashed_runtimes_lease_row_goes_at_the_next_start_and_a_stalled_ones_stays(
    tmp_path: Path,
) -> None:
    """Lapsed lease rows of runtimes that crashed on this machine with no run to take over
    (their process gone, or their pid taken by a process started since their last renewal)
    are deleted when the next runtime takes its lease; a stalled owner's (its process lives,
    started before its renewal) stays, and it renews into it; another machine's stays (only
    time tells there: the test above). Failed before the fix: the crashed ones' rows stayed
    for ever (only their fence views went)."""
    db = tmp_path / "runs.db"
    host = subprocess.Popen(
        [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(600)"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert host.stdout is not None and host.stdout.readline() == "up\n"
        stalled = _lapsed_here("here:2:stalled", host.pid, renewed_ago=0.0)  # after its start
        reused = _lapsed_here("here:3:reused", host.pid)  # renewed before that process began
        with SQLiteStore(db) as crashed:
            crashed.acquire_lease(_lapsed_here("here:1:dead", _dead_pid()))
            stalled_epoch = crashed.acquire_lease(stalled)
            reused_epoch = crashed.acquire_lease(reused)
        store = SQLiteStore(db)
        with Runtime(QUICK_AGENTS, model=QUICK, store=store) as rt:
            owners = {lease.owner for lease in store.leases()}
            assert owners == {rt.owner, "here:2:stalled"}, owners
            assert rt.spawn("quick", "t").result(timeout=60).result == "quick t"
        # the stalled owner wakes: its lease (nobody took it) is its own still
        assert store.renew_lease(msgspec.structs.replace(stalled, epoch=stalled_epoch))
        assert not store.renew_lease(msgspec.structs.replace(reused, epoch=reused_epoch))
        store.close()
    finally:
        host.kill()
        host.wait()


def _fence_views(db: Path) -> set[str]:
    conn = sqlite3.connect(db)
    try:
        found = conn.execute("SELECT name FROM sqlite_master WHERE type = 'view'").fetchall()
    finally:
        conn.close()
    return {str(name) for (name,) in found if str(name).startswith(lease_fences.PREFIX)}


def test_runs_of_a_live_lease_elsewhere_are_left_alone_until_it_lapses(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    owner = "far-host:4242:abcd"
    live = Lease(owner=owner, host="far-host", pid=4242, machine="another machine",
                 renewed_at=time.time(), expires_at=time.time() + 600)  # fmt: skip
    run_id = _orphan(db, owner, live)
    store = SQLiteStore(db)
    with Runtime(QUICK_AGENTS, model=QUICK, store=store) as rt:
        assert rt.restore_report.resumed == [] and rt.restore_report.elsewhere == [run_id]
        assert store.get_run(run_id).owner == owner  # type: ignore[union-attr]
    store.close()


def test_restore_of_some_trees_takes_only_those(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    run_id = _orphan(db, "gone:1:x", None)
    store = SQLiteStore(db)
    with Runtime(QUICK_AGENTS, model=QUICK, store=store, restore=["r-other"]) as rt:
        assert rt.restore_report.resumed == []
        assert store.get_run(run_id).owner == "gone:1:x"  # type: ignore[union-attr]
    with Runtime(QUICK_AGENTS, model=QUICK, store=store, restore=[run_id]) as rt:
        assert rt.restore_report.resumed == [run_id]
    store.close()


def test_a_runtime_that_lost_its_lease_stops_hosting_and_writes_nothing_more(
    tmp_path: Path,
) -> None:
    """A stalled host whose runs were taken over (its lease row released by the taker) hears
    it at its next renewal: every run stops, its caller is told, nothing more is written."""
    db = tmp_path / "runs.db"
    store = SQLiteStore(db)
    started = threading.Event()
    with Runtime(AGENTS, model=SLOW, store=store, lease_s=0.3) as rt:
        rt.subscribe(lambda e: started.set() if e.kind == "started" else None)
        handle = rt.spawn("slow", "a")
        assert started.wait(60)
        taker = SQLiteStore(db)
        taker.release_lease(rt.owner)  # what a resume that took its runs over does
        taker.close()
        outcome = handle.result(timeout=60)
        assert outcome.status is RunStatus.FAILED
        assert outcome.error is not None and "lost its lease" in outcome.error
    record = SQLiteStore(db).get_run(handle.run_id)
    assert record is not None and record.status is RunStatus.RUNNING  # left to its taker


def test_stop_and_send_for_a_run_hosted_by_another_runtime_are_passed_on(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    slow = ScriptedModel(
        {
            "slow": [
                {"tool_calls": [{"name": "wait_for_message", "input": {"timeout": 30}}]},
                {"text": "got {mail_content}", "delay": 30},
            ]
        }
    )
    agents = [AgentSpec(name="slow", description="waits")]
    waiting = threading.Event()

    def on_event(event: Any) -> None:
        if event.kind == "waiting":
            waiting.set()

    with Runtime(agents, model=slow, store=SQLiteStore(db), command_poll_s=0.05) as host:
        host.subscribe(on_event)
        handle = host.spawn("slow", "s")
        assert waiting.wait(60)
        with Runtime(agents, model=slow, store=SQLiteStore(db), command_poll_s=0.05) as other:
            mail_id = other.send(handle.run_id, "hello from elsewhere")
            assert mail_id.startswith("command-")
            assert other.stop(handle.run_id) == (handle.run_id,)
        outcome = handle.result(timeout=60)
    assert outcome.status is RunStatus.CANCELLED
    assert outcome.error == "stopped from another process"
    mail = SQLiteStore(db).mail_for(handle.run_id)
    assert [m.content for m in mail] == ["hello from elsewhere"]
