"""An agent actor whose run ends stops at the end of that handling, without a stop message.

A run ends in a handling of its actor (its start, most often: a trivial function agent ends
in it). The actor then stops when that handling is over, not by a stop message told to its
own mailbox and handled after everything queued before it. These tests hold what that must
keep: the behaviour's ``close`` runs once, after the behaviour's code has returned; nothing
left in the mailbox reaches the behaviour and an ask left there is refused; a run ended from
another thread (a function's own thread using its context) still stops its actor; and the
actor leaves pykka's registry (its own thread) or its dispatcher's count (pooled).

Real actors and threads; a real actor stands in for the supervisor; waits on events.
"""

from __future__ import annotations

import gc
import threading
import weakref
from collections.abc import Iterator
from typing import Any

import pykka
import pytest

from subagents.actors.agent import AgentActor, AgentKit
from subagents.actors.pooled import Dispatcher
from subagents.actors.pooled_agent import PooledAgentActor
from subagents.actors.threads import ThreadPool
from subagents.actors.timer import TimerService
from subagents.behaviour.port import AgentPort
from subagents.definitions.spec import AgentSpec
from subagents.messages import Checkpoint, Mail, RunFinished, RunRecord
from subagents.supervision.effects import StartRun

from .conftest import WAIT

HOSTS = ("pooled", "own_thread")


class _Told(pykka.ThreadingActor):
    """Stands in for the supervisor: keeps what the agent tells it."""

    def __init__(self, finished: threading.Event, items: list[Any]) -> None:
        super().__init__()
        self.finished = finished
        self.items = items

    def on_receive(self, message: Any) -> None:
        self.items.append(message)
        if isinstance(message, RunFinished):
            self.finished.set()


class _Ending:
    """A behaviour that ends its run when told (in its start, or at a message) and goes on a
    little after ``finish`` returns, as a behaviour may: ``order`` says what happened when."""

    def __init__(self, port: AgentPort, order: list[Any], end_in: str) -> None:
        self.port = port
        self.order = order
        self.end_in = end_in
        self.go = threading.Event()
        self.ender: threading.Thread | None = None

    def start(
        self,
        checkpoint: Checkpoint | None,
        pending_mail: tuple[Mail, ...],
        recovered: tuple[Any, ...] = (),
    ) -> None:
        if self.end_in == "start":
            self._end()
        elif self.end_in == "thread":  # another thread ends it; this handling is long over
            self.ender = threading.Thread(target=self._end, name="test-ender")
            self.ender.start()

    def _end(self) -> None:
        assert self.go.wait(WAIT)  # the test has queued its messages behind this handling
        self.port.finish("done")
        self.order.append("after finish")

    def on_message(self, message: Any) -> None:
        self.order.append(("message", message))
        if message == "end":
            self._end()

    def unread_mail(self) -> tuple[str, ...]:
        return ()

    def close(self) -> None:
        self.order.append("close")


class _Host:
    """Where the agent actor runs: a dispatcher's threads, or a pooled thread of its own."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.dispatcher = Dispatcher(size=2, name="t-end") if kind == "pooled" else None
        self.pool = ThreadPool(name="t-end-own")
        self.timer = TimerService()
        self.finished = threading.Event()
        self.told_items: list[Any] = []
        self.told = _Told.start(self.finished, self.told_items)
        self.order: list[Any] = []
        self.made = threading.Event()
        self.behaviour: _Ending | None = None

    def start(self, end_in: str) -> pykka.ActorRef[Any]:
        def make(port: AgentPort) -> _Ending:
            self.behaviour = _Ending(port, self.order, end_in)
            self.made.set()
            return self.behaviour

        where: dict[str, Any] = {"dispatcher": self.dispatcher} if self.dispatcher else {}
        actor = PooledAgentActor if self.dispatcher is not None else AgentActor
        start = StartRun(
            record=RunRecord(run_id="r1", agent="ending", task="t", root_run_id="r1"),
            spec=AgentSpec(name="ending", description="d"),
            deadline=0.0,
        )
        pool = self.pool if self.dispatcher is None else None
        kit = AgentKit(
            supervisor=self.told, timer=self.timer, behaviour_for=lambda _: make, pool=pool
        )
        return actor.start(start, threading.Event(), kit, **where)

    def go(self) -> _Ending:
        """Let the behaviour (made on the actor's thread) end its run."""
        assert self.made.wait(WAIT)
        assert self.behaviour is not None
        self.behaviour.go.set()
        return self.behaviour

    def run_finished(self) -> list[RunFinished]:
        assert self.finished.wait(WAIT)
        return [m for m in self.told_items if isinstance(m, RunFinished)]

    def close(self) -> None:
        self.told.stop(timeout=WAIT)
        self.timer.stop()
        if self.dispatcher is not None:
            assert self.dispatcher.close(WAIT) == []
        assert self.pool.close(WAIT) == []


@pytest.fixture(params=HOSTS)
def host(request: pytest.FixtureRequest) -> Iterator[_Host]:
    h = _Host(request.param)
    yield h
    h.close()


def _stopped(host: _Host, ref: pykka.ActorRef[Any]) -> None:
    """The actor has stopped and is counted nowhere any more."""
    assert ref.actor_stopped.wait(WAIT)
    assert not ref.is_alive()
    assert ref not in pykka.ActorRegistry.get_all()
    if host.dispatcher is not None:
        assert host.dispatcher.live == 0


@pytest.mark.parametrize("end_in", ["start", "message"])
def test_a_run_that_ends_stops_its_actor_after_the_handling_and_closes_its_behaviour_once(
    host: _Host, end_in: str
) -> None:
    ref = host.start(end_in)
    if end_in == "message":
        ref.tell("end")
    host.go()
    assert [f.result for f in host.run_finished()] == ["done"]
    _stopped(host, ref)
    # close() after the code of the handling that ended the run, and only once
    expected = ["after finish", "close"]
    assert host.order == (expected if end_in == "start" else [("message", "end"), *expected])
    with pytest.raises(pykka.ActorDeadError):
        ref.tell("late")


def test_what_is_queued_behind_the_end_never_reaches_the_behaviour_and_an_ask_is_refused(
    host: _Host,
) -> None:
    ref = host.start("start")
    # queued while the start (which ends the run) waits: handled, if at all, after the end
    ref.tell("queued")
    asked = ref.ask("asked", block=False)
    host.go()
    with pytest.raises(pykka.ActorDeadError):
        asked.get(timeout=WAIT)
    _stopped(host, ref)
    assert host.order == ["after finish", "close"]


def test_a_run_ended_from_another_thread_still_stops_its_actor(host: _Host) -> None:
    ref = host.start("thread")
    behaviour = host.go()
    assert [f.result for f in host.run_finished()] == ["done"]
    _stopped(host, ref)  # by pykka's stop message: no handling of its own was going on
    assert behaviour.ender is not None
    behaviour.ender.join(WAIT)
    assert sorted(host.order) == ["after finish", "close"]  # (two threads: either order)


def test_an_ended_runs_actor_and_behaviour_are_freed_without_the_cyclic_gc(
    host: _Host,
) -> None:
    """The actor and its mailbox, and the actor and its behaviour, held each other: every
    ended run's objects waited for the cyclic GC. Now they go with their last reference."""
    ref = host.start("start")
    behaviour = host.go()
    assert [f.result for f in host.run_finished()] == ["done"]
    _stopped(host, ref)
    # the thread that ran its last handling is done with it (waiting for other work)
    if host.dispatcher is not None:
        assert host.dispatcher.wait_idle(WAIT)
    else:
        assert host.pool.wait_until(lambda c: c.parked == c.threads, WAIT)
    actor, made = weakref.ref(behaviour.port), weakref.ref(behaviour)
    gc.disable()  # only reference counting frees them now
    try:
        host.behaviour = None
        del behaviour
        assert made() is None
        assert actor() is None
    finally:
        gc.enable()
    with pytest.raises(pykka.ActorDeadError):  # its ref (which never held it) says so
        ref.tell("late")
