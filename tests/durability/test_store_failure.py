"""When the store fails mid-job (here: the disk is full), no caller hangs and nothing is
acknowledged that was not kept: every run is stopped, every caller gets the store's error,
and the store keeps its last committed state. Once it takes writes again (space freed), the
same runtime records those runs as their callers were told and goes on taking work."""

from __future__ import annotations

from pathlib import Path

import pytest

from subagents import FunctionAgent, Runtime, ScriptedModel, SQLiteStore
from subagents.behaviour.function import AgentContext
from subagents.messages import RunStatus
from subagents.runtime import AdmissionError


async def busy(ctx: AgentContext) -> str:
    for i in range(10_000):  # far more than the small disk holds
        await ctx.spawn("leaf", "x" * 2_000 + str(i))
    return "never"


def leaf(ctx: AgentContext) -> str:
    return "ok " + ctx.task[-4:]


def _told_the_disk_is_full(rt: Runtime) -> None:
    """A spawn of far more than the disk holds, made once the store failed, is told so: its
    spawn tries the store again first (``Outage``: a root spawn tries, as an ask does). While
    the store still fails it is refused on its handle; when that try finds room to record
    the runs it stopped (the first runs' commits and the rolled-back batch leave more or less
    room: an order the test does not force), the run is admitted and its own record finds
    the disk full, failing it with the store's error. (Only the refusal was accepted here:
    under load the other came in 1 of 3 runs of tests/durability.)"""
    handle = rt.spawn("leaf", "y" * 1_000_000)
    try:
        outcome = handle.result(timeout=60)
    except AdmissionError as exc:
        assert "full" in str(exc), exc
    else:
        assert (outcome.status, outcome.error_kind) == (RunStatus.FAILED, "store"), outcome
        assert "full" in (outcome.error or ""), outcome


def test_a_full_disk_stops_the_runs_and_tells_every_caller(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db", max_bytes=256 * 1024)
    agents = [FunctionAgent.create("busy", busy), FunctionAgent.create("leaf", leaf)]
    with Runtime(agents, model=ScriptedModel(), store=store) as rt:
        outcome = rt.spawn("busy", "fill the disk").result(timeout=60)
        assert outcome.status is RunStatus.FAILED
        assert outcome.error_kind == "store"
        assert "full" in (outcome.error or "")
        _told_the_disk_is_full(rt)
    # what was committed is still there, and says the job was not finished (still running,
    # or failed with the store's error if a later request found room to record that)
    reopened = SQLiteStore(tmp_path / "runs.db")
    [root] = [r for r in reopened.list_runs() if r.agent == "busy"]
    assert not root.status.terminal or (
        root.outcome is not None and root.outcome.error_kind == "store"
    )
    reopened.close()


def test_once_space_is_freed_the_same_runtime_goes_on(tmp_path: Path) -> None:
    """A full disk is simulated with SQLite's own page cap (``max_bytes``: ``PRAGMA
    max_page_count``): SQLite fails the write exactly as on a full disk (SQLITE_FULL), the
    file and its log stay where the test's tmp dir is, and freeing space is raising the cap,
    with no root, mount or filler file whose size depends on the file system."""
    store = SQLiteStore(tmp_path / "runs.db", max_bytes=256 * 1024)
    agents = [FunctionAgent.create("busy", busy), FunctionAgent.create("leaf", leaf)]
    with Runtime(agents, model=ScriptedModel(), store=store) as rt:
        failed = rt.spawn("busy", "fill the disk")
        outcome = failed.result(timeout=60)
        assert (outcome.status, outcome.error_kind) == (RunStatus.FAILED, "store")
        _told_the_disk_is_full(rt)
        store.set_max_bytes(None)  # space is freed
        assert rt.spawn("leaf", "more").result(timeout=60).result == "ok more"
        again = rt.spawn("busy", "x").run_id  # and the runtime takes work as before
        rt.stop(again)
    # every run it held when the disk filled is recorded as its caller was told
    reopened = SQLiteStore(tmp_path / "runs.db")
    unfinished = [r for r in reopened.list_runs() if not r.status.terminal]
    assert unfinished == []
    root = reopened.get_run(failed.run_id)
    assert root is not None and root.status is RunStatus.FAILED
    assert root.outcome is not None and root.outcome.error_kind == "store"
    assert "full" in (root.outcome.error or "")
    reopened.close()


def test_spawns_refused_by_a_failed_store_give_their_window_slots_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every told spawn the store fails (its own decision hits the full disk: failed with
    the store's error; or it is told while the store has failed: refused) releases its
    place in the spawn window: with a window of 2, six in a row never wait for room (a
    leaked place would make the third wait, then raise the window's TimeoutError), and
    none is left undecided. (Each told spawn tries the store's recovery first, which
    succeeds here: its small writes fit; then its own task does not.)"""
    monkeypatch.setattr("subagents.runtime._spawn_window.SPAWN_WINDOW", 2)
    store = SQLiteStore(tmp_path / "runs.db", max_bytes=256 * 1024)
    with Runtime([FunctionAgent.create("leaf", leaf)], store=store) as rt:
        window = rt._roots.window
        handles = [rt.spawn("leaf", str(i) * 600_000) for i in range(6)]  # each over the disk
        for handle in handles:
            try:
                outcome = handle.result(timeout=60)
            except AdmissionError as exc:  # told while the store had failed
                assert "full" in str(exc)
            else:  # its own decision found the disk full: failed with the store's error
                assert (outcome.status, outcome.error_kind) == (RunStatus.FAILED, "store")
        # A result can reach its caller just before the supervisor's SpawnsDecided releases
        # the window: wait for the release (a leaked place never comes back: TimeoutError).
        window.settle()
        assert len(window) == 0 and window.blocked == 0
        assert all(h.done for h in handles)
