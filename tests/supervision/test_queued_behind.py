"""Which of a step's next spawns would only queue behind runs queued now
(``supervision/queued_behind.py``, asked by ``actors/step_tail.py``), decided on the core's
state alone, without threads: a spawn whose slot key is a queued run's is held; one of
another agent, of another parent, of an unknown one, or whose definition cannot be read,
is decided at once."""

from __future__ import annotations

from subagents.definitions.spec import AgentSpec
from subagents.messages import SpawnRequest, new_id
from subagents.store.memory import MemoryStore
from subagents.supervision.core import SupervisorCore
from subagents.supervision.limits import Limits
from subagents.supervision.queued_behind import only_queue

from .test_core import Driven

SPECS = {n: AgentSpec(name=n, description=f"the {n}") for n in ("worker", "critic")}


def _lookup(name: str) -> AgentSpec | None:
    if name == "broken":
        raise RuntimeError("the definition of broken cannot be read")
    return SPECS.get(name)


def _driven() -> Driven:
    """A core (10 at once, one per agent) as the actor drives it, on a memory store."""
    store = MemoryStore()
    core = SupervisorCore(
        lookup=_lookup,
        names=lambda: [*SPECS, "broken"],
        read_run=store.get_run,
        limits=Limits(max_concurrency=10, per_agent=1, queue_bound=100),
        clock=lambda: 1000.0,
    )
    return Driven(core, store)


def _with_workers_queued() -> SupervisorCore:
    """One worker running, two queued behind it (one per agent), the critic's slots free."""
    driven = _driven()
    core = driven.core
    for _ in range(3):
        reply, _ = driven.spawn(SpawnRequest(request_id=new_id("q"), agent="worker", task="t"))
        assert reply.error is None, reply.error
    assert len(core.slots.waiting[1]) == 2
    return core


def _spawn(agent: str, parent: str | None = None) -> SpawnRequest:
    return SpawnRequest(request_id=new_id("q"), agent=agent, task="t", parent_run_id=parent)


def test_a_spawn_of_a_queued_key_only_queues() -> None:
    core = _with_workers_queued()
    assert only_queue(core, [_spawn("worker"), _spawn("worker"), "not a spawn"])


def test_a_spawn_of_another_agent_is_decided_at_once() -> None:
    core = _with_workers_queued()
    assert not only_queue(core, [_spawn("worker"), _spawn("critic")])


def test_an_unknown_parent_or_agent_is_decided_at_once() -> None:
    core = _with_workers_queued()
    assert not only_queue(core, [_spawn("worker", parent="r-nobody")])
    assert not only_queue(core, [_spawn("nobody")])


def test_a_definition_that_cannot_be_read_is_decided_at_once_not_raised() -> None:
    """Its lookup raises (a registry that fails): the tail is not held, and the admission
    answers the spawn with the error; before, the exception left the actor's hold."""
    core = _with_workers_queued()
    assert not only_queue(core, [_spawn("worker"), _spawn("broken")])


def test_nothing_queued_holds_nothing() -> None:
    assert not only_queue(_driven().core, [_spawn("worker")])
