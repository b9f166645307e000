"""The spawns of one step of a run are admitted together (``SupervisorActor._spawns``,
``actors/spawn_group.spawns_end``): a few decisions of up to ``STEP_SPAWNS_MOST`` each, one
store transaction each, not one per child; yet each admitted, queued or refused by its own
rules, in the order the step asked for them, and each reply reaching the parent."""

from __future__ import annotations

import threading
from contextlib import AbstractContextManager

from polling import wait_until
from subagents.actors.spawn_group import STEP_SPAWNS_MOST
from subagents.behaviour.function import AgentContext, FunctionAgent
from subagents.messages import Event, EventKind
from subagents.runtime import Runtime
from subagents.store.memory import MemoryStore
from subagents.supervision.limits import Limits

from .conftest import WAIT

CHILDREN = 2 * STEP_SPAWNS_MOST + 50
"""More than two decisions' worth: the limits of a later decision count the earlier ones."""


class CountingStore(MemoryStore):
    """A memory store that counts its transactions (``batch``: one per decision the
    supervisor writes, or per group of reports)."""

    def __init__(self) -> None:
        super().__init__()
        self.batches = 0

    def batch(self) -> AbstractContextManager[None]:
        self.batches += 1
        return super().batch()


def test_a_steps_spawns_are_decided_together_each_by_its_own_rules_in_order() -> None:
    release = threading.Event()
    spawning = threading.Event()
    store = CountingStore()
    spawned: list[str] = []

    def held(ctx: AgentContext) -> str:  # keeps its slot until released
        assert release.wait(WAIT)
        return ctx.task

    async def parent(ctx: AgentContext) -> str:
        # one step: a bad agent name in the middle, and one spawn too many at the end
        tasks = [f"c{i}" for i in range(CHILDREN)]
        agents = ["held"] * CHILDREN
        agents[STEP_SPAWNS_MOST + 7] = "nobody"  # refused alone, in the second decision
        spawning.set()
        pendings = [ctx.spawn(a, t) for a, t in zip(agents, tasks, strict=True)]
        pendings.append(ctx.spawn("held", "one too many"))
        done, refused = [], []
        for pending in pendings:
            try:
                done.append((await pending).result)
            except Exception as exc:
                refused.append(str(exc))
        return f"{len(done)} done, in order: {done == [t for t in tasks if t != 'c107']}; " + (
            " | ".join(refused)
        )

    def on_event(event: Event) -> None:
        if event.agent == "held" and event.kind == EventKind.SPAWNED:
            spawned.append(event.data["task"])

    # 5 children at a time; the rest queue, up to the bound: the last spawn finds it full
    queued = CHILDREN - 1 - 5
    limits = Limits(max_concurrency=6, per_agent=5, max_children=5, queue_bound=queued)
    agents = [FunctionAgent.create("held", held), FunctionAgent.create("parent", parent)]
    with Runtime(agents, store=store, limits=limits) as rt:
        rt.subscribe(on_event)
        handle = rt.spawn("parent", "go")
        assert spawning.wait(WAIT)
        before = store.batches
        wanted = [f"c{i}" for i in range(CHILDREN) if i != STEP_SPAWNS_MOST + 7]
        wait_until(lambda: len(spawned) >= len(wanted), "every admitted child's SPAWNED event")
        transactions = store.batches - before
        release.set()
        outcome = handle.result(WAIT)
    assert spawned == wanted  # in the order the step asked for them
    # each by its own rules: the unknown agent refused alone, the one past the queue's bound too
    assert outcome.result is not None
    head, _, refusals = outcome.result.partition("; ")
    assert head == f"{CHILDREN - 1} done, in order: True", outcome.result
    reasons = refusals.split(" | ")
    assert len(reasons) == 2, reasons
    assert "nobody" in reasons[0]
    assert "queue" in reasons[1]
    # a few decisions for the step's spawns, not one (and one transaction) per child
    assert transactions <= 2 * (CHILDREN // STEP_SPAWNS_MOST + 1) + 5, transactions
