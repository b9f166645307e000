"""``Runtime.spawn`` tells its request and returns before the supervisor decides it
(``runtime/_root_runs.py``, ``_spawn_window.py``, ``actors/spawn_group.py``): what the
caller can see wrong is refused at once; what depends on the runtime's state reaches the
handle, and every handle method says it the same way; whatever the caller (or another
thread given the run id) does next behaves as if the spawn had been decided first; at most
a window of spawns is undecided; consecutive told spawns are decided as one group; a close
with spawns in flight ends each handle clearly.

The supervisor is held by a subscriber that blocks its thread at an event (``_Hold``): what
is told meanwhile queues in its inbox, undecided, as long as the test needs."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from polling import wait_until
from subagents.behaviour.function import AgentContext, FunctionAgent
from subagents.definitions.spec import AgentSpec
from subagents.messages import Event, EventKind, RunStatus, TreeUsage
from subagents.runtime import AdmissionError, RunHandle, Runtime, RuntimeClosed
from subagents.store.sqlite import SQLiteStore
from subagents.supervision.limits import Limits

from .conftest import QUIET, WAIT

pytestmark = pytest.mark.usefixtures("no_new_threads")


class _Hold:
    """A subscriber that holds the supervisor's thread at the first event of a run whose
    task is ``task``, until ``gate`` is set."""

    def __init__(self, task: str = "blocker") -> None:
        self.task = task
        self.held = threading.Event()
        self.gate = threading.Event()

    def __call__(self, event: Event) -> None:
        first = event.kind is EventKind.SPAWNED and event.data.get("task") == self.task
        if first and not self.held.is_set():
            self.held.set()
            assert self.gate.wait(WAIT)


def _held(release: threading.Event, name: str = "held") -> FunctionAgent:
    def held(ctx: AgentContext) -> str:  # stays live until released
        assert release.wait(WAIT)
        return ctx.task

    return FunctionAgent.create(name, held)


def _inbox(rt: Runtime) -> Any:
    supervisor = rt._hosting.supervisor
    assert supervisor is not None
    return supervisor._ref.actor_inbox


def _in_thread(results: dict[str, Any], key: str, call: Callable[[], Any]) -> threading.Thread:
    def run() -> None:
        try:
            results[key] = call()
        except Exception as exc:
            results[key] = exc

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def _held_supervisor(rt: Runtime, hold: _Hold) -> RunHandle:
    """A run spawned whose first event holds the supervisor: nothing told after it is
    decided until ``hold.gate`` is set."""
    rt.subscribe(hold)
    blocker = rt.spawn("held", hold.task)
    assert hold.held.wait(WAIT)
    return blocker


def test_a_refusal_by_the_runtimes_state_reaches_the_handle_and_every_method_says_it() -> None:
    release = threading.Event()
    limits = Limits(max_concurrency=1, queue_bound=1)
    with Runtime([_held(release)], limits=limits) as rt:
        first = rt.spawn("held", "first")
        queued = rt.spawn("held", "queued")
        refused = rt.spawn("held", "one too many")  # returns: the queue is the runtime's
        why = r"queue bound: the admission queue is full \(1 runs"
        with pytest.raises(AdmissionError, match=why):
            refused.result(WAIT)
        assert refused.done and "queue bound" in (refused.refused or "")
        for call in (
            lambda: refused.status,
            refused.wait_admitted,
            refused.stop,
            lambda: refused.send("hello"),
            refused.usage,
            lambda: rt.wait_all([refused], timeout=0),
            lambda: rt.wait_any([first, refused], timeout=0),
            lambda: rt.synthesize([refused], wait=0),
        ):
            with pytest.raises(AdmissionError, match=why):
                call()
        shown = f"RunHandle({refused.run_id!r}, agent='held', refused: {refused.refused})"
        assert repr(refused) == shown
        assert refused.run_id not in rt._roots.waiting()  # nothing left waiting for it
        assert first.status is RunStatus.RUNNING and queued.status is RunStatus.QUEUED
        release.set()
        assert [h.result(WAIT).result for h in (first, queued)] == ["first", "queued"]


def test_a_handle_asked_before_its_refusal_is_decided_says_the_refusal_not_unknown() -> None:
    """stop/send/usage asked while the spawn is still undecided queue behind it; the
    supervisor refuses the spawn, then answers them "unknown run": the handle says why."""
    release = threading.Event()
    limits = Limits(max_concurrency=1, queue_bound=1)
    with Runtime([_held(release)], limits=limits, **QUIET) as rt:
        hold = _Hold()
        blocker = _held_supervisor(rt, hold)  # holds the slot
        queued = rt.spawn("held", "queued")
        refused = rt.spawn("held", "refused")
        results: dict[str, Any] = {}
        threads = [
            _in_thread(results, "stop", refused.stop),
            _in_thread(results, "send", lambda: refused.send("hi")),
            _in_thread(results, "usage", refused.usage),
        ]
        wait_until(lambda: _inbox(rt).qsize() == 5, "the three asks queued behind the spawns")
        hold.gate.set()
        for thread in threads:
            thread.join(WAIT)
        for key in ("stop", "send", "usage"):
            assert isinstance(results[key], AdmissionError), (key, results[key])
            assert "queue bound" in str(results[key])
        release.set()
        assert [h.result(WAIT).result for h in (blocker, queued)] == ["blocker", "queued"]


def test_a_policy_of_the_definition_refuses_on_the_handle() -> None:
    bad = AgentSpec(name="bad", description="d", metadata={"costBudget": -1})
    with Runtime([bad, FunctionAgent.create("ok", lambda ctx: "ok")]) as rt:
        handle = rt.spawn("bad", "t")
        with pytest.raises(AdmissionError, match="costBudget"):
            handle.result(WAIT)
        # the request's own setting, unlike the definition's: raised at once, nothing told
        with pytest.raises(AdmissionError, match="a token budget must be a positive integer"):
            rt.spawn("ok", "t", token_budget=0)
        assert rt.spawn("ok", "t").result(WAIT).result == "ok"


def test_an_unknown_agent_is_refused_at_once_in_the_supervisors_words() -> None:
    release = threading.Event()
    with Runtime([_held(release), FunctionAgent.create("other", lambda ctx: "")]) as rt:
        hold = _Hold()
        blocker = _held_supervisor(rt, hold)
        with pytest.raises(AdmissionError) as at_once:  # the supervisor is held: the caller's
            rt.spawn("zed", "x")
        hold.gate.set()
        [theirs] = rt.spawn_many([("zed", "x")])  # the supervisor's own refusal
        assert isinstance(theirs, AdmissionError)
        assert str(theirs) == f"job 0 ('zed'): {at_once.value}"
        assert str(at_once.value) == "unknown agent 'zed'; known agents: held, other"
        release.set()
        assert blocker.result(WAIT).result == "blocker"


def test_an_agent_removed_before_the_decision_is_a_refusal_on_the_handle() -> None:
    release = threading.Event()
    with Runtime([_held(release), _held(release, "going")]) as rt:
        hold = _Hold()
        blocker = _held_supervisor(rt, hold)
        handle = rt.spawn("going", "t")  # known when told
        assert rt.registry.unregister("going")  # hot reload: gone before the decision
        hold.gate.set()
        with pytest.raises(AdmissionError, match="unknown agent 'going'; known agents: held"):
            handle.result(WAIT)
        release.set()
        assert blocker.result(WAIT).result == "blocker"


def _reads(rt: Runtime, handle: RunHandle) -> dict[str, Callable[[], Any]]:
    """Every public path that reads the store about a run, given its id or handle."""
    run_id = handle.run_id
    return {
        "get": lambda: rt.get(run_id),
        "attach": lambda: rt.attach(run_id).run_id,
        "runs": lambda: [r.run_id for r in rt.runs()],
        "requested": lambda: [r.run_id for r in rt.runs(requester="external")],
        "tree": lambda: rt.tree(run_id).run_id,
        "totals": lambda: rt.totals(run_id).runs,
        "approvals": lambda: rt.approvals(run_id),
        "wait_any": lambda: rt.wait_any([run_id], timeout=0),
        "wait_ended": lambda: rt.wait_ended([run_id], 0),
        "status": lambda: handle.status,
    }


def test_another_thread_given_the_run_id_finds_it_whatever_it_calls() -> None:
    release = threading.Event()
    with Runtime([_held(release)], **QUIET) as rt:
        hold = _Hold()
        blocker = _held_supervisor(rt, hold)
        handle = rt.spawn("held", "x")  # told, undecided while the supervisor is held
        run_id = handle.run_id
        results: dict[str, Any] = {}
        reads = _reads(rt, handle)
        threads = [_in_thread(results, key, call) for key, call in reads.items()]
        wait_until(lambda: rt._roots.window.settling == len(reads), "every read waiting")
        asks = {  # behind the spawn's tell in the supervisor's inbox
            "progress": lambda: rt.status(run_id).status,
            "usage": lambda: rt.usage(run_id),
            "send": lambda: rt.send(run_id, "hello"),
            "stats": lambda: rt.stats(run_id).queued,
        }
        threads += [_in_thread(results, key, call) for key, call in asks.items()]
        wait_until(lambda: _inbox(rt).qsize() == 1 + len(asks), "every ask queued")
        hold.gate.set()
        for thread in threads:
            thread.join(WAIT)
        record = results["get"]
        assert record is not None and record.run_id == run_id, record
        assert results["attach"] == run_id
        assert run_id in results["runs"] and run_id in results["requested"]
        assert results["tree"] == run_id
        assert results["totals"] == 1
        assert results["approvals"] == []
        assert isinstance(results["wait_any"], TimeoutError), results["wait_any"]
        assert results["wait_ended"] == {}
        assert results["status"] is RunStatus.RUNNING
        assert results["progress"] is RunStatus.RUNNING
        assert isinstance(results["usage"], TreeUsage) and results["usage"].live == 1
        assert isinstance(results["send"], str), results["send"]
        assert results["stats"] == 0
        assert rt.stop(run_id) == (run_id,)
        release.set()
        assert handle.result(WAIT).status is RunStatus.CANCELLED
        assert blocker.result(WAIT).result == "blocker"


def test_the_caller_itself_finds_its_run_at_once_after_spawn() -> None:
    release = threading.Event()
    with Runtime([_held(release)]) as rt:
        hold = _Hold()
        blocker = _held_supervisor(rt, hold)
        opener = threading.Thread(  # opens the supervisor once this thread waits on a read
            target=lambda: (
                wait_until(lambda: rt._roots.window.settling == 1, "the read waiting"),
                hold.gate.set(),
            )
        )
        opener.start()
        handle = rt.spawn("held", "mine")
        record = rt.get(handle.run_id)  # from the same thread, straight after
        opener.join(WAIT)
        assert record is not None and record.task == "mine"
        assert [r.task for r in rt.runs()] == ["blocker", "mine"]
        release.set()
        assert handle.result(WAIT).result == "mine"
        assert blocker.result(WAIT).result == "blocker"


def test_spawns_told_together_are_decided_in_one_store_commit(tmp_path: Path) -> None:
    release = threading.Event()
    store = SQLiteStore(tmp_path / "runs.db")
    quiet = {"command_poll_s": 3600, "sweep_every_s": 3600, "lease_s": 3600}  # no other writes
    with Runtime([_held(release)], store=store, **quiet) as rt:
        hold = _Hold()
        blocker = _held_supervisor(rt, hold)
        handles = [rt.spawn("held", f"t{i}") for i in range(5)]
        begun: list[str] = []
        store._tx.connection().set_trace_callback(begun.append)
        hold.gate.set()
        for handle in handles:  # each waits for its decision, then reads the store
            assert handle.wait_admitted() in (RunStatus.RUNNING, RunStatus.QUEUED)
        store._tx.connection().set_trace_callback(None)
        assert begun.count("BEGIN IMMEDIATE") == 1, begun  # the five, and nothing else
        assert len(rt._roots.window) == 0
        release.set()
        assert [h.result(WAIT).result for h in handles] == [f"t{i}" for i in range(5)]
        assert blocker.result(WAIT).result == "blocker"


@pytest.fixture
def small_window(monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr("subagents.runtime._spawn_window.SPAWN_WINDOW", 3)
    return 3


def test_a_stalled_store_fills_the_window_and_the_next_spawn_waits_for_room(
    tmp_path: Path, small_window: int
) -> None:
    db = tmp_path / "runs.db"
    release = threading.Event()
    with Runtime([_held(release)], store=SQLiteStore(db, busy_timeout=WAIT)) as rt:
        window = rt._roots.window
        lock = sqlite3.connect(db, isolation_level=None)  # the store's writes wait on it
        lock.execute("BEGIN IMMEDIATE")
        try:
            told = [rt.spawn("held", f"t{i}") for i in range(small_window)]
            assert len(window) == small_window  # none decided: the store is stalled
            results: dict[str, Any] = {}
            late = _in_thread(results, "late", lambda: rt.spawn("held", "late"))
            wait_until(lambda: window.blocked == 1, "the next spawn waiting for room")
            assert len(window) == small_window and "late" not in results
        finally:
            lock.execute("ROLLBACK")
            lock.close()
        late.join(WAIT)
        assert isinstance(results["late"], RunHandle), results["late"]
        handles = [*told, results["late"]]
        assert all(h.status is RunStatus.RUNNING for h in handles)
        release.set()
        assert [h.result(WAIT).result for h in handles] == ["t0", "t1", "t2", "late"]


def test_a_spawn_that_finds_no_room_in_time_names_the_stall(
    tmp_path: Path, small_window: int
) -> None:
    db = tmp_path / "runs.db"
    release = threading.Event()
    with Runtime([_held(release)], store=SQLiteStore(db, busy_timeout=WAIT)) as rt:
        rt._roots.window.wait_s = 0.2
        lock = sqlite3.connect(db, isolation_level=None)
        lock.execute("BEGIN IMMEDIATE")
        try:
            told = [rt.spawn("held", f"t{i}") for i in range(small_window)]
            with pytest.raises(TimeoutError, match="the supervisor is stalled"):
                rt.spawn("held", "one more")
        finally:
            lock.execute("ROLLBACK")
            lock.close()
        assert rt._roots.waiting() == [h.run_id for h in told]  # none left for the refused
        release.set()
        assert [h.result(WAIT).result for h in told] == ["t0", "t1", "t2"]


def test_a_close_with_spawns_in_flight_ends_each_handle_cancelled() -> None:
    release = threading.Event()
    rt = Runtime([_held(release)], **QUIET)
    try:
        hold = _Hold()
        blocker = _held_supervisor(rt, hold)
        handles = [rt.spawn("held", f"t{i}") for i in range(5)]
        closer = threading.Thread(target=rt.close)
        closer.start()
        wait_until(lambda: _inbox(rt).qsize() == 6, "the close's stop queued behind them")
        hold.gate.set()
        # the agents are released only once every handle has ended (by the close's stop): a
        # released blocker's own end raced the close's stop, and under load (the newcomer's
        # whole run, session 31) it was decided first: completed, not cancelled
        wait_until(lambda: all(h.done for h in [blocker, *handles]), "every handle ended")
        release.set()
        closer.join(WAIT)
        assert not closer.is_alive()
        for handle in [blocker, *handles]:
            outcome = handle.result(WAIT)
            assert (outcome.status, outcome.error) == (RunStatus.CANCELLED, "runtime closed")
        with pytest.raises(RuntimeClosed):
            rt.spawn("held", "after")
    finally:
        release.set()
        hold.gate.set()
        rt.close()
