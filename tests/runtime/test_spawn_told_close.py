"""A spawn told while the runtime closes (``Runtime.spawn`` tells, ``runtime/_spawn_window``):
one that reaches the supervisor after the close's ``StopAll`` must not be admitted. Admitted,
its agent started after every run was cancelled, its record stayed unfinished in the store
once the runtime had closed: the next runtime on the store took it up as an orphan and ran
it again (``restore``).

The race is made certain, not waited for by chance: a spawn held by a full window (it passed
the runtime's open check) is let in by the decisions queued ahead of the close's ``StopAll``,
and the supervisor is held inside ``StopAll`` (a subscriber blocking at the ``cancelled``
event) until that spawn's tell is in its inbox."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pykka
import pytest

from polling import wait_until
from subagents.behaviour.function import AgentContext, FunctionAgent
from subagents.messages import Ask, Event, EventKind, Inspect
from subagents.runtime import AdmissionError, RunHandle, Runtime, RuntimeClosed
from subagents.store.sqlite import SQLiteStore

from .conftest import QUIET, WAIT

pytestmark = pytest.mark.usefixtures("no_new_threads")


class _HoldAt:
    """Holds the supervisor's thread at the first event of ``kind`` (of a run whose task is
    ``task``, if given) until ``gate`` is set."""

    def __init__(self, kind: EventKind, task: str | None = None) -> None:
        self.kind, self.task = kind, task
        self.held = threading.Event()
        self.gate = threading.Event()

    def __call__(self, event: Event) -> None:
        if event.kind is not self.kind or self.held.is_set():
            return
        if self.task is not None and event.data.get("task") != self.task:
            return
        self.held.set()
        assert self.gate.wait(WAIT)


def test_a_spawn_told_after_the_closes_stop_all_leaves_no_unfinished_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("subagents.runtime._spawn_window.SPAWN_WINDOW", 2)
    db = tmp_path / "runs.db"
    release = threading.Event()

    def held(ctx: AgentContext) -> str:
        assert release.wait(WAIT)
        return ctx.task

    quiet = {"command_poll_s": 3600, "sweep_every_s": 3600}
    rt = Runtime([FunctionAgent.create("held", held)], store=SQLiteStore(db), **quiet)
    spawned = _HoldAt(EventKind.SPAWNED, "blocker")
    stopping = _HoldAt(EventKind.CANCELLED)
    results: dict[str, Any] = {}
    try:
        rt.subscribe(spawned)
        rt.subscribe(stopping)
        blocker = rt.spawn("held", "blocker")
        assert spawned.held.wait(WAIT)  # the supervisor is held: what follows queues
        filler = rt.spawn("held", "filler")  # the window (of 2, with the blocker) is full

        def late() -> None:
            try:
                results["late"] = rt.spawn("held", "late")  # past the open check: waits
            except Exception as exc:
                results["late"] = exc

        spawner = threading.Thread(target=late)
        spawner.start()
        window = rt._roots.window
        wait_until(lambda: window.blocked == 1, "the late spawn waiting for room")
        closer = threading.Thread(target=rt.close)
        closer.start()
        supervisor = rt._hosting.supervisor
        assert supervisor is not None
        inbox = supervisor._ref.actor_inbox
        wait_until(lambda: inbox.qsize() == 2, "the close's StopAll behind the filler")
        spawned.gate.set()  # decisions make room: the late spawn gets in, behind StopAll
        assert stopping.held.wait(WAIT)  # inside StopAll
        spawner.join(WAIT)
        assert isinstance(results["late"], RunHandle), results["late"]
        wait_until(lambda: inbox.qsize() == 1, "the late spawn told behind StopAll")
        stopping.gate.set()
        release.set()
        closer.join(WAIT)
        assert not closer.is_alive()
        late_handle: RunHandle = results["late"]
        with pytest.raises(AdmissionError, match="the runtime is closing"):
            late_handle.result(WAIT)  # refused: its run never started
        for handle in (blocker, filler):
            assert handle.result(WAIT).status.terminal
    finally:
        release.set()
        spawned.gate.set()
        stopping.gate.set()
        rt.close()
    store = SQLiteStore(db)
    try:
        unfinished = [(r.task, r.status) for r in store.list_runs() if not r.status.terminal]
        assert unfinished == []  # nothing for the next runtime to take up and run again
    finally:
        store.close()


def test_pykkas_stop_right_behind_told_spawns_is_handled_after_them_in_order() -> None:
    """The supervisor takes the root spawns queued behind a told one out of its inbox
    (``spawn_group.take_queued``) and hands the first other envelope to ``handle_envelope``:
    pykka's own stop (an ask, ``ActorRef.stop``) must be neither swallowed nor taken ahead
    of them. The spawns are decided (their window places given back), the stop answered,
    and an ask behind the stop gets pykka's ``ActorDeadError``, not a hang."""
    release = threading.Event()

    def held(ctx: AgentContext) -> str:
        assert release.wait(WAIT)
        return ctx.task

    rt = Runtime([FunctionAgent.create("held", held)], **QUIET)
    spawned = _HoldAt(EventKind.SPAWNED, "blocker")
    try:
        rt.subscribe(spawned)
        blocker = rt.spawn("held", "blocker")
        assert spawned.held.wait(WAIT)
        handles = [rt.spawn("held", f"t{i}") for i in range(3)]
        supervisor = rt._hosting.supervisor
        assert supervisor is not None
        ref = supervisor._ref
        stopped = ref.stop(block=False)
        behind = ref.ask(Ask(Inspect()), block=False)
        wait_until(lambda: ref.actor_inbox.qsize() == 5, "three spawns, the stop, an ask")
        spawned.gate.set()
        assert stopped.get(timeout=WAIT) is True
        with pytest.raises(pykka.ActorDeadError):
            behind.get(timeout=WAIT)
        assert len(rt._roots.window) == 0  # decided before the stop: none left undecided
        for handle in handles:
            assert handle.refused is None
            record = rt.get(handle.run_id)  # committed by their decision, before the stop
            assert record is not None and record.status.value in ("running", "queued")
    finally:
        release.set()
        spawned.gate.set()
        rt.close()
    for handle in [blocker, *handles]:
        assert handle.result(WAIT).status.terminal  # the close cancels what it holds


def test_a_close_while_a_full_window_of_spawns_is_undecided(tmp_path: Path) -> None:
    """A close behind ``SPAWN_WINDOW`` undecided spawns (the supervisor held at the first):
    each of them is decided and then cancelled by the close, the spawn that waited for room
    gets none before the close (refused on its handle, or ``RuntimeClosed``), and nothing is
    left unfinished in the store."""
    db = tmp_path / "runs.db"

    async def waits(ctx: AgentContext) -> str:
        await ctx.receive(timeout=WAIT)  # until the close cancels it
        return "not cancelled"

    quiet = {"command_poll_s": 3600, "sweep_every_s": 3600}
    rt = Runtime([FunctionAgent.create("waits", waits)], store=SQLiteStore(db), **quiet)
    spawned = _HoldAt(EventKind.SPAWNED)
    results: dict[str, Any] = {}
    try:
        rt.subscribe(spawned)
        window = rt._roots.window
        handles = [rt.spawn("waits", "0")]
        assert spawned.held.wait(WAIT)
        handles += [rt.spawn("waits", str(i)) for i in range(1, window.size)]

        def extra() -> None:
            try:
                results["extra"] = rt.spawn("waits", "one more")
            except Exception as exc:
                results["extra"] = exc

        spawner = threading.Thread(target=extra)
        spawner.start()
        wait_until(lambda: window.blocked == 1, "the spawn past the window waiting for room")
        closer = threading.Thread(target=rt.close)
        closer.start()
        supervisor = rt._hosting.supervisor
        assert supervisor is not None
        inbox = supervisor._ref.actor_inbox
        wait_until(lambda: inbox.qsize() == window.size, "the close's StopAll behind them")
        spawned.gate.set()
        closer.join(WAIT)
        spawner.join(WAIT)
        assert not closer.is_alive() and not spawner.is_alive()
    finally:
        spawned.gate.set()
        rt.close()
    extra_handle = results["extra"]
    if isinstance(extra_handle, RunHandle):
        with pytest.raises(AdmissionError, match="the runtime is closing"):
            extra_handle.result(WAIT)
    else:
        assert isinstance(extra_handle, RuntimeClosed), extra_handle
    outcomes = [h.result(WAIT) for h in handles]
    assert {(o.status.value, o.error) for o in outcomes} == {("cancelled", "runtime closed")}
    store = SQLiteStore(db)
    try:
        runs = store.list_runs()
        assert len(runs) == len(handles) and all(r.status.terminal for r in runs)
    finally:
        store.close()
