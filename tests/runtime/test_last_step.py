"""A run's last step, told (nothing waits on it: the run ends with it), is decided in the
supervisor's open group with the run's end (``_GROUPED``): one transaction for the step's
checkpoint and the run's outcome, not one each (on SQLite, a commit less per LLM run). The
agent tells both in one ``Batch`` (``AgentActor._end``), so this holds however the
supervisor's thread and the agent's are scheduled."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from polling import wait_until
from subagents.definitions.spec import AgentSpec
from subagents.messages import (
    Batch,
    Checkpoint,
    Event,
    EventKind,
    Outcome,
    RunFinished,
    StepTaken,
)
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime
from subagents.store.memory import MemoryStore

from .conftest import WAIT


class NumberedStore(MemoryStore):
    """A memory store that numbers its transactions (the outermost ``batch``) and notes in
    which one each checkpoint and outcome was written."""

    def __init__(self) -> None:
        super().__init__()
        self.batches = 0
        self._depth = 0
        self.written: list[tuple[str, str, int]] = []

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        with super().batch():
            self._depth += 1
            if self._depth == 1:
                self.batches += 1
            try:
                yield
            finally:
                self._depth -= 1

    def save_checkpoint(self, checkpoint: Checkpoint) -> None:
        self.written.append(("checkpoint", checkpoint.run_id, self.batches))
        super().save_checkpoint(checkpoint)

    def save_outcome(self, outcome: Outcome, delivered: bool = False) -> None:
        self.written.append(("outcome", outcome.run_id, self.batches))
        super().save_outcome(outcome, delivered)


def test_a_told_last_step_and_the_runs_end_are_one_transaction() -> None:
    store = NumberedStore()
    gate, held = threading.Event(), threading.Event()

    def hold(event: Event) -> None:  # the supervisor's thread, publishing the run's start
        if event.kind == EventKind.STARTED and event.agent == "w" and not held.is_set():
            held.set()
            assert gate.wait(WAIT)  # meanwhile the run takes its step and ends

    worker = AgentSpec(name="w", description="One turn, no tools.", tools=())
    with Runtime([worker], model=ScriptedModel({"w": [{"text": "done"}]}), store=store) as rt:
        rt.subscribe(hold)
        handles: list[Any] = []  # (spawned from a thread: its answer waits on the hold)
        spawner = threading.Thread(target=lambda: handles.append(rt.spawn("w", "go")))
        spawner.start()
        assert held.wait(WAIT)
        supervisor: Any = rt._hosting.supervisor
        inbox = supervisor._ref.actor_inbox
        wait_until(lambda: inbox.qsize() >= 2, "the step and the end queued")
        gate.set()
        spawner.join(WAIT)
        (handle,) = handles
        assert handle.result(WAIT).result == "done"
        run_id = handle.run_id
    step = [b for kind, rid, b in store.written if kind == "checkpoint" and rid == run_id]
    end = [b for kind, rid, b in store.written if kind == "outcome" and rid == run_id]
    assert step and end, store.written
    assert step[-1] == end[-1], store.written  # the last step's checkpoint, with the end


def test_a_told_last_step_reaches_the_supervisor_in_one_message_with_the_end() -> None:
    """Not only when both happen to be queued: the agent tells them as one ``Batch`` (the
    step first), so the supervisor cannot commit the step's group before the end comes."""
    gate, held = threading.Event(), threading.Event()

    def hold(event: Event) -> None:
        if event.kind == EventKind.STARTED and event.agent == "w" and not held.is_set():
            held.set()
            assert gate.wait(WAIT)

    worker = AgentSpec(name="w", description="One turn, no tools.", tools=())
    with Runtime([worker], model=ScriptedModel({"w": [{"text": "done"}]})) as rt:
        rt.subscribe(hold)
        handles: list[Any] = []
        spawner = threading.Thread(target=lambda: handles.append(rt.spawn("w", "go")))
        spawner.start()
        try:
            assert held.wait(WAIT)
            ref = rt._hosting.supervisor._ref
            inbox = ref.actor_inbox  # held: nothing takes from it
            line = ref._actor_weakref().late  # the agents' reports (``LateReports``), if used
            queued: list[Any] = []
            messages: list[Any] = []
            while not any(_ended(m) for m in messages):  # the agent's last message
                queued.append(inbox.get(timeout=WAIT))
                messages = [e.message for e in queued] + [r for _, r in line._reports]
            for envelope in queued:  # back, in order, for the supervisor to go on
                inbox.put(envelope)
        finally:
            gate.set()
        spawner.join(WAIT)
        (handle,) = handles
        assert handle.result(WAIT).result == "done"
    ends = [m for m in messages if isinstance(m, Batch) and _ends_with_step(m)]
    assert len(ends) == 1, messages
    assert not [m for m in messages if isinstance(m, (StepTaken, RunFinished))], messages


def _ends_with_step(batch: Batch) -> bool:
    kinds = [type(m) for m in batch.messages]
    return kinds[-2:] == [StepTaken, RunFinished]


def _ended(message: Any) -> bool:
    if isinstance(message, Batch):
        return any(isinstance(m, RunFinished) for m in message.messages)
    return isinstance(message, RunFinished)
