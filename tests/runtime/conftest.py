"""Helpers for runtime tests: an event recorder to wait on, and small agent builders."""

from __future__ import annotations

import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gates import GATE_THREAD
from subagents.actors.pooled import Dispatcher
from subagents.definitions.spec import AgentSpec
from subagents.messages import (
    ChatMessage,
    Event,
    EventKind,
    ModelRequest,
    ToolResultBlock,
)
from subagents.models.scripted import ScriptedModel
from subagents.store.base import RunStore
from subagents.store.memory import MemoryStore
from subagents.store.sqlite import SQLiteStore

TERMINAL = frozenset(
    {
        EventKind.COMPLETED,
        EventKind.FAILED,
        EventKind.CANCELLED,
        EventKind.TIMED_OUT,
        EventKind.BUDGET_EXCEEDED,
    }
)

WAIT = 60.0
"""The longest any test waits for something that should take milliseconds: a hang guard, not
a timing (a passing wait returns at once; on a loaded machine milliseconds can become seconds)."""

QUIET = {"command_poll_s": 3600.0, "sweep_every_s": 3600.0}
"""``Runtime`` options for a test that counts the supervisor's inbox while it holds the
supervisor: without them the command poll (every 0.5 s by default) and the sweep tell it
messages of their own (3 in 2 s held, measured), so a wait for an exact count that takes
longer than that on a loaded machine passes the count and hangs."""


class Events:
    """Subscribe it to a runtime; wait on what it has seen, without sleeping."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.items: list[Event] = []

    def __call__(self, event: Event) -> None:
        with self._cond:
            self.items.append(event)
            self._cond.notify_all()

    def snapshot(self) -> list[Event]:
        with self._cond:
            return list(self.items)

    def wait_for(self, predicate: Callable[[list[Event]], bool], timeout: float = WAIT) -> None:
        with self._cond:
            ok = self._cond.wait_for(lambda: predicate(self.items), timeout)
        assert ok, f"condition not met within {timeout} s; events: {self.describe()}"

    def wait_count(self, kind: EventKind, agent: str | None, n: int) -> None:
        self.wait_for(lambda items: _count(items, kind, agent) >= n)

    def of(self, kind: EventKind, agent: str | None = None) -> list[Event]:
        return [e for e in self.snapshot() if e.kind is kind and agent in (None, e.agent)]

    def kinds(self) -> set[EventKind]:
        return {e.kind for e in self.snapshot()}

    def terminal_counts(self) -> Counter[str]:
        return Counter(e.run_id for e in self.snapshot() if e.kind in TERMINAL)

    def describe(self) -> str:
        return ", ".join(f"{e.kind}:{e.agent}" for e in self.snapshot()[-40:])


class SlotTally:
    """Counts the runs holding a concurrency slot, from the event stream, and keeps the peak
    per scope (global, agent, tier, parent): started or unparked +1, parked or ended -1.

    Events are published on the supervisor's thread in the order it decided them, so this
    tally is exactly the number of slot holders at every point, and every run working holds
    a slot: the peak bounds the runs working at once."""

    def __init__(self, tiers: dict[str, int | None] | None = None) -> None:
        self.tiers = tiers or {}
        self.lock = threading.Lock()
        self.holding: set[str] = set()
        self.now: Counter[str] = Counter()
        self.peak: Counter[str] = Counter()
        self.started: set[str] = set()
        self.parked = 0

    def _keys(self, event: Event) -> list[str]:
        keys = ["global", f"agent:{event.agent}"]
        tier = self.tiers.get(event.agent)
        if tier is not None:
            keys.append(f"tier:{tier}")
        if event.parent_run_id is not None:
            keys.append(f"parent:{event.parent_run_id}")
        return keys

    def __call__(self, event: Event) -> None:
        with self.lock:
            if event.kind in (EventKind.STARTED, EventKind.UNPARKED):
                self.started.add(event.run_id)
                if event.run_id not in self.holding:  # a restart starts again with its slot
                    self.holding.add(event.run_id)
                    for k in self._keys(event):
                        self.now[k] += 1
                        self.peak[k] = max(self.peak[k], self.now[k])
            elif event.kind is EventKind.PARKED or event.kind in TERMINAL:
                self.parked += event.kind is EventKind.PARKED
                if event.run_id in self.holding:
                    self.holding.discard(event.run_id)
                    for k in self._keys(event):
                        self.now[k] -= 1

    def max_of(self, prefix: str) -> int:
        """The highest peak among the scopes whose key starts with ``prefix``."""
        with self.lock:
            return max((v for k, v in self.peak.items() if k.startswith(prefix)), default=0)


def _count(items: list[Event], kind: EventKind, agent: str | None) -> int:
    return sum(1 for e in items if e.kind is kind and agent in (None, e.agent))


def spec(name: str, **fields: Any) -> AgentSpec:
    return AgentSpec(
        name=name, description=f"The {name} agent.", prompt=f"You are {name}.", **fields
    )


def requests_of(model: ScriptedModel, agent: str) -> list[ModelRequest]:
    return [r for r in model.requests if r.agent == agent]


def tool_results(message: ChatMessage) -> list[ToolResultBlock]:
    return [b for b in message.content if isinstance(b, ToolResultBlock)]


@pytest.fixture
def no_new_threads() -> Iterator[None]:
    """Fail the test if a thread it started is still alive when it ends (a test's own gates
    excepted: their thread serves the gate until it is collected, see ``gates.py``)."""
    before = set(threading.enumerate())
    yield
    left = [
        t
        for t in threading.enumerate()
        if t not in before and t.is_alive() and t.name != GATE_THREAD
    ]
    assert left == [], f"threads left behind: {[t.name for t in left]}"


def at_once(send: Callable[[int], object], senders: int, go: threading.Event) -> None:
    """``send(i)`` for each of ``senders`` on a thread of its own, all started before ``go``
    is set (each waits on it: they put at once), then each joined, and it must have ended."""
    threads = [threading.Thread(target=send, args=(s,)) for s in range(senders)]
    for t in threads:
        t.start()
    go.set()
    for t in threads:
        t.join(WAIT)
        assert not t.is_alive()


@pytest.fixture
def dispatcher(request: pytest.FixtureRequest) -> Iterator[Dispatcher]:
    """A ``Dispatcher`` of two threads that replaces a thread stalled 20 ms (soon: tests hold
    handlings), its threads named after the test's module; it must close leaving no actor."""
    module = request.module.__name__.rpartition(".")[2]
    d = Dispatcher(size=2, stall_s=0.02, name=f"t-{module.removeprefix('test_')}")
    yield d
    assert d.close(WAIT) == []


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RunStore]:
    """The runtime's store: in memory, and a real SQLite file."""
    made: RunStore = (
        MemoryStore() if request.param == "memory" else SQLiteStore(tmp_path / "runs.db")
    )
    yield made
    made.close()


@pytest.fixture
def tiny_switch_interval() -> Iterator[None]:
    """The GIL handed between threads as often as CPython can (a switch between any two
    bytecodes): the races of a read-modify-write come within a test's reach; at the default
    5 ms they come rarely."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(before)
