"""A ``spawn_many`` whose ask times out starts nothing half-owned (``actors/ask_claims``).

Before: the caller got ``TimeoutError`` and its waiters were dropped, but its ``SpawnMany``
stayed in the supervisor's inbox and was decided later: the runs started and ran with nobody
waiting. Now the supervisor claims such an ask before deciding it and the caller revokes it
when its wait runs out, and only one of them can: a revoked one is dropped (nothing
recorded), a claimed one's caller waits for its answer (handles for every run it started).

The supervisor is held by an event subscriber (it runs on the supervisor's thread) blocking
on an ``Event``; the ask's timeout is made short (``RootRuns.ask_timeout``), never slept on.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Any

import pykka
import pytest
import structlog

from subagents.actors.ask_claims import AskClaims
from subagents.actors.supervisor_client import AskRevoked, SupervisorClient
from subagents.behaviour.function import AgentContext, FunctionAgent
from subagents.messages import Event, RunStatus
from subagents.models.scripted import ScriptedModel
from subagents.runtime import RunHandle, Runtime
from subagents.store.sqlite import SQLiteStore

from .conftest import WAIT, spec


def quick(ctx: AgentContext) -> str:
    return f"did {ctx.task}"


class Holder:
    """A subscriber that holds the supervisor's thread at the first event ``wanted`` picks,
    until ``gate`` is set."""

    def __init__(self, agent: str, hold_for: float = WAIT) -> None:
        self.agent = agent
        self.hold_for = hold_for
        self.holding = threading.Event()
        self.gate = threading.Event()

    def __call__(self, event: Event) -> None:
        if event.agent == self.agent and not self.holding.is_set():
            self.holding.set()
            assert self.gate.wait(self.hold_for)


def _agents() -> list[FunctionAgent]:
    return [FunctionAgent.create(name, quick) for name in ("quick", "hold")]


def test_a_spawn_many_the_supervisor_had_not_taken_is_withdrawn_nothing_started(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    holder = Holder("hold")
    with Runtime(_agents(), store=store) as rt:
        rt.subscribe(holder)
        try:
            held = rt.spawn("hold", "the supervisor is held at its first event")
            assert holder.holding.wait(WAIT)
            rt._starts.ask_timeout = 0.1  # (plus 2 ms per job)
            with pytest.raises(TimeoutError) as timed_out:
                rt.spawn_many([("quick", f"job {i}") for i in range(5)])
        finally:
            holder.gate.set()
        assert held.result(timeout=WAIT).status is RunStatus.COMPLETED
        rt._starts.ask_timeout = 30.0
        # asked after the withdrawn one: the supervisor's inbox is handled in order, so
        # the withdrawn ask was handled (dropped) before this one is answered
        [after] = rt.spawn_many([("quick", "after")])
        assert isinstance(after, RunHandle)
        assert after.result(timeout=WAIT).result == "did after"
        tasks = sorted(r.task for r in store.list_runs())
        assert tasks == ["after", "the supervisor is held at its first event"]  # no job
        assert "none of its 5 runs was started or recorded" in str(timed_out.value)
        assert rt._roots.waiting() == []  # no waiter left behind
        supervisor = rt._hosting.supervisor
        assert supervisor is not None and len(supervisor.claims) == 0


def test_a_spawn_many_the_supervisor_took_is_answered_past_the_timeout(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    holder = Holder("hold")  # holds the supervisor INSIDE the spawn_many's decision
    saved = structlog.get_config()
    structlog.reset_defaults()
    answer: list[Any] = []
    try:
        with Runtime(_agents(), store=store) as rt:
            rt.subscribe(holder)
            rt._starts.ask_timeout = (
                2.0  # an idle supervisor takes it well within (a loaded machine)
            )
            jobs = [("quick", "a"), ("hold", "b"), ("quick", "c")]
            with structlog.testing.capture_logs() as logs:
                caller = threading.Thread(target=lambda: answer.append(rt.spawn_many(jobs)))
                try:
                    caller.start()
                    assert holder.holding.wait(WAIT)  # claimed: being decided
                    overran = threading.Event()  # never set: a wait between looks at the log
                    for _ in range(int(WAIT / 0.01)):  # the caller's timeout passed (it says so)
                        if [e for e in logs if "deciding it past the ask's" in e["event"]]:
                            break
                        overran.wait(0.01)
                finally:
                    holder.gate.set()
                    caller.join(WAIT)
            assert [e for e in logs if "deciding it past the ask's" in e["event"]]
            [handles] = answer  # the caller was answered, not told it timed out
            assert all(isinstance(h, RunHandle) for h in handles)
            results = [h.result(timeout=WAIT).result for h in handles]
            assert results == ["did a", "did b", "did c"]
            supervisor = rt._hosting.supervisor
            assert supervisor is not None and len(supervisor.claims) == 0
    finally:
        structlog.configure(**saved)
        holder.gate.set()


def test_a_continue_run_the_supervisor_had_not_taken_is_withdrawn_nothing_started(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    model = ScriptedModel({"a": ["first answer", "second answer"]})
    holder = Holder("hold")
    agents = [spec("a"), FunctionAgent.create("hold", quick)]
    with Runtime(agents, model=model, store=store) as rt:
        first = rt.spawn("a", "the question")
        assert first.result(timeout=WAIT).result == "first answer"
        rt.subscribe(holder)
        try:
            held = rt.spawn("hold", "the supervisor is held at its first event")
            assert holder.holding.wait(WAIT)
            rt._starts.ask_timeout = 0.1
            with pytest.raises(TimeoutError) as timed_out:
                rt.continue_run(first.run_id, "and then?")
        finally:
            holder.gate.set()
        assert held.result(timeout=WAIT).status is RunStatus.COMPLETED
        rt.stats()  # asked after the withdrawn one: that one was handled (dropped) first
        assert [r.continues for r in store.list_runs() if r.continues] == []
        assert "continue_run: the supervisor did not take the request" in str(timed_out.value)
        assert rt._roots.waiting() == []
        rt._starts.ask_timeout = 30.0
        again = rt.continue_run(first.run_id, "and then?")  # called again: one run
        assert again.result(timeout=WAIT).result == "second answer"
        assert [r.continues for r in store.list_runs() if r.continues] == [first.run_id]


def test_the_claim_goes_to_whoever_comes_first() -> None:
    claims = AskClaims()
    taken = claims.open()
    assert claims.claim(taken)  # the supervisor first: the caller cannot withdraw it
    assert not claims.revoke(taken)
    claims.close(taken)
    withdrawn = claims.open()
    assert withdrawn != taken
    assert claims.revoke(withdrawn)  # the caller first: the supervisor drops it
    assert not claims.claim(withdrawn)
    interrupted = claims.open()
    claims.close(interrupted)  # a caller gone without an answer: dropped too
    assert not claims.claim(interrupted)
    assert len(claims) == 0
    assert not claims.claim(12345)  # never opened: not decided


def test_a_spawn_many_taken_by_a_supervisor_stalled_for_ever_is_not_waited_for_ever(
    tmp_path: Path,
) -> None:
    # The supervisor took the request and then stalls inside its decision (a subscriber that
    # never returns, a store lock held elsewhere): the caller is not held for ever, it is told
    # the request was taken and its runs may still start, with their ids to find them by.
    store = SQLiteStore(tmp_path / "runs.db")
    holder = Holder("hold", hold_for=3 * WAIT)  # INSIDE the decision, past the join below
    answer: list[BaseException] = []

    def call(rt: Runtime) -> None:
        try:
            rt.spawn_many([("quick", "a"), ("hold", "b")])
        except BaseException as exc:
            answer.append(exc)

    with Runtime(_agents(), store=store) as rt:
        rt.subscribe(holder)
        rt._starts.ask_timeout = 2.0  # an idle supervisor takes it well within (a loaded machine)
        rt._starts.taken_grace = 0.2
        caller = threading.Thread(target=call, args=(rt,))
        try:
            caller.start()
            assert holder.holding.wait(WAIT)  # claimed: being decided, and stalled there
            caller.join(WAIT)
            assert not caller.is_alive(), "the caller waits for a stalled supervisor for ever"
        finally:
            holder.gate.set()
            caller.join(WAIT)
        [error] = answer
        assert isinstance(error, TimeoutError)
        assert "the supervisor took the request" in str(error)
        assert "its runs may still start" in str(error)
        assert rt._roots.waiting() == []
        supervisor = rt._hosting.supervisor
        assert supervisor is not None and len(supervisor.claims) == 0
        # released: the runs it decided go on, found by the ids the error named
        runs = {r.run_id: r for r in store.list_runs()}
        assert sorted(r.task for r in runs.values()) == ["a", "b"]
        for run_id in runs:
            assert run_id in str(error)
            assert rt.attach(run_id).result(timeout=WAIT).status is RunStatus.COMPLETED


def test_a_continue_run_taken_by_a_stalled_supervisor_names_the_run_that_may_start(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    model = ScriptedModel({"a": ["first answer", "second answer"]})
    holder = Holder("a", hold_for=3 * WAIT)  # INSIDE the continue_run's decision
    answer: list[BaseException] = []
    with Runtime([spec("a")], model=model, store=store) as rt:
        first = rt.spawn("a", "the question")
        assert first.result(timeout=WAIT).result == "first answer"
        rt.subscribe(holder)
        rt._starts.ask_timeout = 2.0  # an idle supervisor takes it well within
        rt._starts.taken_grace = 0.2

        def call() -> None:
            try:
                rt.continue_run(first.run_id, "and then?")
            except BaseException as exc:
                answer.append(exc)

        caller = threading.Thread(target=call)
        try:
            caller.start()
            assert holder.holding.wait(WAIT)  # claimed: being decided, and stalled there
            caller.join(WAIT)
            assert not caller.is_alive(), "the caller waits for a stalled supervisor for ever"
        finally:
            holder.gate.set()
            caller.join(WAIT)
        [error] = answer
        assert isinstance(error, TimeoutError)
        assert "continue_run: the supervisor took the request" in str(error)
        assert rt._roots.waiting() == []
        [again] = [r for r in store.list_runs() if r.continues == first.run_id]
        assert again.run_id in str(error)  # named: the caller can take it
        assert rt.attach(again.run_id).result(timeout=WAIT).result == "second answer"


def test_a_withdrawn_ask_names_its_timeout_as_a_person_reads_it() -> None:
    # spawn_many's timeout is 30 s + 2 ms per job: 274 jobs made it 30.548000000000002 s
    # in the message. A plain actor that never answers stands for a stalled supervisor.
    gate = threading.Event()

    class Stalled(pykka.ThreadingActor):
        def on_receive(self, message: Any) -> Any:
            gate.wait(WAIT)

    stalled = Stalled.start()
    try:
        client = SupervisorClient(stalled)
        blocker = stalled.ask("hold", block=False)  # the actor's thread held from now on
        with pytest.raises(AskRevoked) as revoked:
            client.ask_claimed("start runs", timeout=0.1 + 0.2)
        assert "within 0.3 s" in str(revoked.value)
        assert len(client.claims) == 0
    finally:
        gate.set()
        blocker.get(timeout=WAIT)
        stalled.stop()


def test_a_spawn_many_interrupted_before_the_supervisor_took_it_starts_nothing(
    tmp_path: Path,
) -> None:
    # docs/runtime.md: a caller interrupted while it waits (KeyboardInterrupt) withdraws a
    # request not yet taken. A real SIGINT to the main thread, blocked in spawn_many's wait.
    assert threading.current_thread() is threading.main_thread()
    store = SQLiteStore(tmp_path / "runs.db")
    holder = Holder("hold")
    with Runtime(_agents(), store=store) as rt:
        rt.subscribe(holder)
        supervisor = rt._hosting.supervisor
        assert supervisor is not None
        main = threading.main_thread().ident
        assert main is not None
        interrupted = threading.Event()

        def interrupt() -> None:
            for _ in range(int(WAIT / 0.01)):  # the caller has opened its claim: it waits
                if len(supervisor.claims):
                    break
                interrupted.wait(0.01)
            signal.pthread_kill(main, signal.SIGINT)
            interrupted.set()

        try:
            held = rt.spawn("hold", "the supervisor is held at its first event")
            assert holder.holding.wait(WAIT)
            rt._starts.ask_timeout = WAIT  # never runs out: only the interrupt ends the wait
            helper = threading.Thread(target=interrupt)
            helper.start()
            with pytest.raises(KeyboardInterrupt):
                rt.spawn_many([("quick", f"job {i}") for i in range(3)])
            assert interrupted.is_set()
            helper.join(WAIT)
        finally:
            holder.gate.set()
        assert held.result(timeout=WAIT).status is RunStatus.COMPLETED
        rt._starts.ask_timeout = 30.0
        [after] = rt.spawn_many([("quick", "after")])  # behind the interrupted one
        assert isinstance(after, RunHandle) and after.result(timeout=WAIT).result == "did after"
        tasks = sorted(r.task for r in store.list_runs())
        assert tasks == ["after", "the supervisor is held at its first event"]  # no job
        assert rt._roots.waiting() == []
