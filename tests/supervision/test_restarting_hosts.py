"""A restore leaves alone the trees of a host being started again: a detached tree's host
(an owner ``host:pid:nonce:NAME``) whose lease died with its process, while its cluster
still lists NAME (Ray is starting it again; its new process takes the tree up). Taking the
tree too would have two runtimes work on it. The store reads which dead owners are
restarting (``store.snapshot``); recovery treats them as alive (``supervision.recovery``)."""

from __future__ import annotations

from pathlib import Path

from subagents.definitions.spec import AgentSpec
from subagents.messages import RunRecord, RunStatus
from subagents.store.snapshot import RestoreSnapshot, UnfinishedRun, read_snapshot
from subagents.store.sqlite import SQLiteStore
from subagents.store.writes import ReleaseLease
from subagents.supervision.core import SupervisorCore

HOST = "subagents-tree-ab"
KILLED = f"h:7:n:{HOST}"  # the host's process that died; Ray is starting it again


def _record(
    run_id: str, owner: str, *, parent: str | None = None, status: RunStatus = RunStatus.RUNNING
) -> RunRecord:
    return RunRecord(
        run_id=run_id,
        agent="lead",
        task="t",
        root_run_id=parent or run_id,
        parent_run_id=parent,
        depth=1 if parent else 0,
        status=status,
        started_at=1.0,
        owner=owner,
    )


def _core(owner: str) -> SupervisorCore:
    specs = {"lead": AgentSpec(name="lead", description="d")}
    return SupervisorCore(lookup=specs.get, names=lambda: list(specs), owner=owner)


def _snapshot(restarting: frozenset[str]) -> RestoreSnapshot:
    runs = (
        _record("root", KILLED),
        _record("child", KILLED, parent="root"),
        _record("other", "h:9:n"),  # a plain process's orphan
    )
    return RestoreSnapshot(
        unfinished=tuple(UnfinishedRun(record=r) for r in runs), restarting=restarting
    )


def test_a_restore_leaves_a_tree_whose_host_is_being_restarted_to_it() -> None:
    core = _core("me:1:x")
    report, decided = core.recovery.restore(_snapshot(frozenset({KILLED})))
    assert report.elsewhere == ["root", "child"] and report.restarting == ["root", "child"]
    assert report.resumed == ["other"] and report.taken_from == ["h:9:n"]
    assert "root" not in core.runs and "child" not in core.runs
    assert ReleaseLease(KILLED) not in decided.writes  # its new process keeps the tree


def test_without_the_restart_known_the_tree_is_orphaned_and_taken() -> None:
    report, _ = _core("me:1:x").recovery.restore(_snapshot(frozenset()))
    assert report.resumed == ["root", "child", "other"] and not report.restarting


def test_the_restarted_host_itself_takes_up_its_predecessors_tree() -> None:
    """The host's new process (same NAME, a new pid and nonce) is the one that takes it."""
    core = _core(f"h:8:m:{HOST}")
    report, _ = core.recovery.restore(_snapshot(frozenset({KILLED})), roots=["root"])
    assert report.resumed == ["root", "child"] and not report.elsewhere
    assert report.taken_from == [KILLED]


def test_the_snapshot_names_the_dead_owners_whose_host_is_still_listed(tmp_path: Path) -> None:
    """Read from a real store: each host name asked once; live owners and plain processes'
    owners are not asked; no ``listed`` (a local store): nobody is restarting."""
    store = SQLiteStore(tmp_path / "runs.sqlite3")
    try:
        store.save_run(_record("root", KILLED))
        store.save_run(_record("child", KILLED, parent="root"))
        store.save_run(_record("gone", "h:5:n:subagents-tree-cd"))  # Ray gave it up
        store.save_run(_record("live", "h:6:n:subagents-tree-ef"))
        store.save_run(_record("plain", "h:9:n"))
        store.save_run(_record("done", "h:4:n:subagents-tree-gh", status=RunStatus.COMPLETED))
        asked: list[str] = []

        def listed(name: str) -> bool:
            asked.append(name)
            return name in {HOST, "subagents-tree-gh"}

        live = frozenset({"h:6:n:subagents-tree-ef"})
        snapshot = read_snapshot(store, live, listed=listed)
        assert snapshot.restarting == {KILLED}
        assert sorted(asked) == [HOST, "subagents-tree-cd"]
        assert read_snapshot(store, live).restarting == frozenset()
    finally:
        store.close()
