"""The least a fan-out of this design does: ``fanout.py``'s ``least_fanout`` floor.

The runtime admits every run centrally: a parent's spawns go to ONE serial supervisor actor,
which takes a slot for each child it can start (``per_agent``), queues the rest in order,
starts each admitted child's actor on a reused thread, hears each child's end, frees its
slot, starts the next queued child and tells the parent the outcome (docs/architecture.md,
"The spawn path"). So every hand-over of a freed slot to the next child passes through that
one thread: the child's thread -> the supervisor -> the next child's thread. This module
does exactly that with bare parts and the least bookkeeping, to answer: does the
central-admission design itself reach the goal (1.1x ideal) on this machine?

- a parent actor that tells the supervisor its children's spawns as ONE message (the
  runtime's step sends them as a few decisions) and counts the outcomes told back;
- a supervisor actor on its own thread: a count of free slots, a FIFO queue, an outcome kept
  per child (a dict), a child started per slot, the next started when one ends;
- each child an actor made as the runtime's agent actors are (``FastInboxActor``, not in
  pykka's registry), its loop on a reused parked thread (``spawn._Parked``: a thread per
  child at once, kept for the next), that sleeps ``delay`` (the model call; it holds its
  slot, as an LLM worker does), tells the supervisor its end and stops itself.

What it leaves out, all of which the runtime does per child: the core's admission and end
decisions and their store writes, the request's checks, the run's id, record and events,
its deadline, the behaviour (a model request built, the conversation, the tools offered),
the dispatcher's blocking hand-off (``about_to_block``), the parent's function resumed per
outcome. So its makespan is a lower bound of the runtime's: if even it is above 1.1x ideal
here, central admission cannot reach the goal on this machine.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any

import msgspec
import pykka

from _common import mark
from spawn import _Parked
from subagents.actors.inbox import FastInboxActor

WAIT = 120.0


class Spawn(msgspec.Struct, frozen=True, gc=False):
    """A parent's children, asked for at once."""

    tasks: tuple[str, ...]


class Finished(msgspec.Struct, frozen=True, gc=False):
    """A child's end, told to the supervisor."""

    child: int
    result: str


class Gauge:
    """How many children slept at once, at most (so the floor is 'limit at a time' too)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.now = self.most = 0

    def enter(self) -> None:
        with self._lock:
            self.now += 1
            self.most = max(self.most, self.now)

    def leave(self) -> None:
        with self._lock:
            self.now -= 1


class Child(FastInboxActor):
    """One child run: its one 50 ms call, its end told, stopped from inside."""

    def __init__(
        self, supervisor: pykka.ActorRef[Any], child: int, delay: float, gauge: Gauge, pool: _Parked
    ) -> None:
        super().__init__()
        self._supervisor, self._child, self._delay = supervisor, child, delay
        self._gauge, self._pool = gauge, pool

    @classmethod
    def start(cls, *args: Any, **kwargs: Any) -> pykka.ActorRef[Any]:
        obj = cls(*args, **kwargs)  # (not registered: the runtime's pooled actors are not)
        obj._start_actor_loop()
        return obj.actor_ref

    def _start_actor_loop(self) -> None:
        self._pool.run(self._actor_loop)

    def on_start(self) -> None:
        self._gauge.enter()
        time.sleep(self._delay)  # the model call: the thread blocks, the slot is held
        self._gauge.leave()
        self._supervisor.tell(Finished(self._child, "done"))
        self.actor_stopped.set()  # (as ``spawn._LeastAgent``: no stop message round trip)
        self.on_stop()


class Supervisor(FastInboxActor):
    """Central admission: a slot per running child, the rest queued in order."""

    def __init__(self, limit: int, delay: float, gauge: Gauge, pool: _Parked) -> None:
        super().__init__()
        self.free, self.delay, self.gauge, self.pool = limit, delay, gauge, pool
        self.queued: deque[int] = deque()
        self.outcomes: dict[int, str] = {}
        self.parent: pykka.ActorRef[Any] | None = None

    def _start_actor_loop(self) -> None:
        threading.Thread(target=self._actor_loop, name="least-supervisor", daemon=True).start()

    def on_receive(self, message: Any) -> None:
        if isinstance(message, Finished):
            self.outcomes[message.child] = message.result
            if self.queued:  # the freed slot goes to the next in line
                self._start(self.queued.popleft())
            else:
                self.free += 1
            if self.parent is not None:
                self.parent.tell(message)
            return
        parent, spawn = message
        self.parent = parent
        for child in range(len(spawn.tasks)):
            if self.free:
                self.free -= 1
                self._start(child)
            else:
                self.queued.append(child)

    def _start(self, child: int) -> None:
        Child.start(self.actor_ref, child, self.delay, self.gauge, self.pool)


class Parent(FastInboxActor):
    """Asks for every child at once and counts their outcomes."""

    def __init__(
        self,
        supervisor: pykka.ActorRef[Any],
        children: int,
        marks: dict[str, float],
        done: threading.Event,
    ) -> None:
        super().__init__()
        self.supervisor, self.children, self.marks = supervisor, children, marks
        self.left, self.done = children, done

    def _start_actor_loop(self) -> None:
        threading.Thread(target=self._actor_loop, name="least-agent-parent", daemon=True).start()

    def on_receive(self, message: Any) -> None:
        if isinstance(message, Finished):
            self.left -= 1
            if self.left == 0:
                mark(self.marks, "end")
                self.done.set()
            return
        mark(self.marks, "start")
        tasks = tuple(f"part {i}" for i in range(self.children))
        self.supervisor.tell((self.actor_ref, Spawn(tasks)))


def least_fanout(children: int, limit: int, delay: float) -> tuple[float, int]:
    """(makespan in seconds, children asleep at once at most) of the least fan-out."""
    marks: dict[str, float] = {}
    done = threading.Event()
    gauge, pool = Gauge(), _Parked("least-agent")
    supervisor = Supervisor.start(limit, delay, gauge, pool)
    parent = Parent.start(supervisor, children, marks, done)
    try:
        parent.tell("go")
        if not done.wait(WAIT):
            raise RuntimeError(f"the least fan-out did not finish in {WAIT:g} s")
    finally:
        parent.stop()
        supervisor.stop()
        pool.close()
    return marks["end"] - marks["start"], gauge.most
