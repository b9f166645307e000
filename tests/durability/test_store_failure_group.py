"""A group commit that fails just before the supervisor handles a run's admission: the run
is refused with the store's error, not admitted into a store the supervisor has given up on
(where its outcome would never reach its caller)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from subagents import FunctionAgent, Runtime, ScriptedModel, SQLiteStore
from subagents.behaviour.function import AgentContext
from subagents.messages import Event, EventKind, RunStatus
from subagents.runtime import AdmissionError

WAIT = 60.0


def test_a_run_told_after_a_failed_group_commit_is_refused(tmp_path: Path) -> None:
    started, go = threading.Event(), threading.Event()
    entered, release = threading.Event(), threading.Event()

    def big(ctx: AgentContext) -> str:
        started.set()
        assert go.wait(WAIT)
        return "x" * 400_000  # its outcome does not fit the small disk: the commit fails

    def small(ctx: AgentContext) -> str:
        return "ok"

    def hold(event: Event) -> None:  # a subscriber: keeps the supervisor's thread busy
        if event.kind is EventKind.SPAWNED and event.agent == "hold":
            entered.set()
            assert release.wait(WAIT)

    store = SQLiteStore(tmp_path / "runs.db", max_bytes=256 * 1024)
    agents = [
        FunctionAgent.create("big", big),
        FunctionAgent.create("small", small),
        FunctionAgent.create("hold", small),
    ]
    with Runtime(agents, model=ScriptedModel(), store=store) as rt:
        handle = rt.spawn("big", "go")
        assert started.wait(WAIT)
        supervisor: Any = rt._supervisor
        rt.subscribe(hold)
        holder = threading.Thread(target=lambda: rt.spawn("hold", "busy"))
        holder.start()
        assert entered.wait(WAIT)
        go.set()  # its RunFinished (grouped: its commit waits for the queue) is queued next
        assert rt._hosting.agents_idle(WAIT)
        errors: list[BaseException] = []

        def run_small() -> None:
            try:
                rt.run("small", "after", wait=WAIT)
            except BaseException as exc:
                errors.append(exc)

        inbox = supervisor._ref.actor_inbox
        queued = inbox.qsize()  # the finished run's RunFinished, and whatever else came first
        assert queued >= 1
        caller = threading.Thread(target=run_small)
        caller.start()
        deadline = time.monotonic() + WAIT
        while inbox.qsize() <= queued and time.monotonic() < deadline:  # the run is queued too
            threading.Event().wait(0.001)
        assert inbox.qsize() > queued
        release.set()
        holder.join(WAIT + 5)
        caller.join(WAIT + 5)
        assert not caller.is_alive()
        assert len(errors) == 1
        assert isinstance(errors[0], AdmissionError), repr(errors[0])
        assert "the run store failed" in str(errors[0])
        # the finished run's completion was not committed: its caller hears of the store
        outcome = handle.result(timeout=WAIT)
        assert outcome.status is RunStatus.FAILED and outcome.error_kind == "store"
        # the store takes writes again (what did not fit was rolled back): the runtime goes
        # on, and records the run whose end was lost as its caller was told
        assert rt.spawn("small", "more").result(timeout=WAIT).result == "ok"
        record = store.get_run(handle.run_id)
        assert record is not None and record.status is RunStatus.FAILED
        assert record.outcome is not None and record.outcome.error_kind == "store"
