"""A node's asks reach the driver's supervisor in the order its link brought them, before
anything the node told after them, however long the supervisor takes to answer
(``actors/node_asks.py``). No Ray: a real runtime's supervisor, stalled on its own
thread by an event subscriber (as a supervisor stalled for long is), and the driver's pool of
answering threads, smaller than the asks waiting on it.

Why it matters: a model turn's step whose ask timed out sends the turn's mail by the
supervisor "behind the step" (``actors.agent._unrecorded``); were the step's ask still in the
pool's queue, that mail would be decided and committed before the step, and a crash between
the two would keep the mail and lose the turn (mailed again by the resumed run)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from runtime.conftest import WAIT
from subagents.actors.node_asks import NodeAsks
from subagents.actors.remote import Answer
from subagents.definitions.spec import AgentSpec
from subagents.messages import Ask, Event, EventKind, Inspect, PollCommands
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime

POOL = 2
"""The answering threads (the driver has 8): fewer than the asks, so one waits for a thread."""


def test_an_ask_waiting_for_a_thread_is_in_the_supervisors_inbox_before_a_later_tell() -> None:
    gate, held = threading.Event(), threading.Event()

    def hold(event: Event) -> None:  # the supervisor's thread: stalled until the test is done
        if event.kind == EventKind.STARTED and event.agent == "w" and not held.is_set():
            held.set()
            assert gate.wait(WAIT)

    worker = AgentSpec(name="w", description="One turn, no tools.", tools=())
    answers: list[Answer] = []
    answered = threading.Event()

    def reply(answer: Answer) -> None:
        answers.append(answer)
        if len(answers) == POOL + 1:
            answered.set()

    asks = [Ask(Inspect()) for _ in range(POOL + 1)]
    told = PollCommands()
    pool = ThreadPoolExecutor(max_workers=POOL)
    with Runtime([worker], model=ScriptedModel({"w": [{"text": "done"}]})) as rt:
        rt.subscribe(hold)
        handles: list[Any] = []  # (spawned from a thread: its answer waits on the hold)
        spawner = threading.Thread(target=lambda: handles.append(rt.spawn("w", "go")))
        spawner.start()
        queued: list[Any] = []
        try:
            assert held.wait(WAIT)
            ref = rt._hosting.supervisor._ref
            driver = NodeAsks(ref, pool, timeout_s=WAIT)
            for key, ask in enumerate(asks, start=1):  # as the link's reading thread does
                driver.ask(key, ask, reply)
            ref.tell(told)  # what the node told after them
            inbox = ref.actor_inbox  # the supervisor is held: nothing takes from it
            while not inbox.empty():
                queued.append(inbox.get_nowait())
            for envelope in queued:  # back, in order, for the supervisor to go on
                inbox.put(envelope)
        finally:
            gate.set()
        spawner.join(WAIT)
        assert answered.wait(WAIT), answers
        pool.shutdown(wait=True)
    ours = [e.message for e in queued if any(e.message is m for m in (*asks, told))]
    assert ours == [*asks, told], ours  # every ask queued, in order, before the later tell
    assert sorted(a.key for a in answers) == list(range(1, POOL + 2)), answers
    assert all(a.error is None for a in answers), answers
