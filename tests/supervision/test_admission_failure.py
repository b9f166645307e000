"""A batch of spawns (``spawn_many``, a step's siblings) whose admission of one request
raises (a bug, not a refusal: here the definitions' lookup fails for one agent) answers
every request: the one that raised with the error, as a refusal is answered (to its
requesting run, or to the outside), and the others as if it were not there, admitted,
written and started. Before, the exception lost the whole decision: the runs admitted
before it in the batch stayed in the supervisor's memory, holding their slots, with no
record in the store, no start and no answer. Without threads: the core alone, its writes
carried out on a store as the actor does."""

from __future__ import annotations

from subagents.definitions.spec import AgentSpec
from subagents.messages import RunStatus, SpawnReply, SpawnRequest, new_id
from subagents.store.memory import MemoryStore
from subagents.supervision.core import SupervisorCore
from subagents.supervision.effects import StartRun, Tell, TellOutside
from subagents.supervision.limits import Limits

from .test_core import Driven

SPECS = {n: AgentSpec(name=n, description=f"the {n}") for n in ("lead", "worker", "critic")}


def _lookup(name: str) -> AgentSpec | None:
    """The definitions as the runtime's registry gives them; one fails to be read."""
    if name == "broken":
        raise RuntimeError("the definition of broken cannot be read")
    return SPECS.get(name)


def _driven() -> tuple[Driven, MemoryStore]:
    store = MemoryStore()
    core = SupervisorCore(
        lookup=_lookup,
        names=lambda: [*SPECS, "broken"],
        read_run=store.get_run,
        limits=Limits(max_concurrency=20, max_children=10, queue_bound=100),
        clock=lambda: 1000.0,
    )
    return Driven(core, store), store


def _memory_matches_the_store(driven: Driven, store: MemoryStore) -> None:
    """Every run the core holds unfinished is in the store, unfinished, and so the reverse."""
    held = {s.run_id for s in driven.runs if not s.record.status.terminal}
    kept = {r.run_id for r in store.list_runs() if not r.status.terminal}
    assert held == kept


def _check(replies: tuple[SpawnReply, ...], agents: list[str]) -> list[str]:
    """Each reply answers its request: the broken one the error, the others a run id."""
    assert len(replies) == len(agents)
    admitted = []
    for reply, agent in zip(replies, agents, strict=True):
        if agent == "broken":
            assert reply.run_id is None
            assert reply.error is not None
            assert "could not handle" in reply.error
            assert "the definition of broken cannot be read" in reply.error
        else:
            assert reply.error is None, reply.error
            assert reply.run_id is not None
            admitted.append(reply.run_id)
    return admitted


def test_a_batch_of_roots_answers_each_when_one_admission_raises() -> None:
    driven, store = _driven()
    agents = ["worker", "critic", "broken", "worker", "lead"]
    reqs = [SpawnRequest(request_id=new_id("q"), agent=a, task="t") for a in agents]
    decision = driven._do(driven.core.spawn_many(reqs))
    admitted = _check(decision.reply, agents)
    assert len(admitted) == 4  # the ones before the broken one, and those after it
    started = {e.record.run_id for e in decision.effects if isinstance(e, StartRun)}
    assert started == set(admitted)
    for run_id in admitted:
        record = store.get_run(run_id)
        assert record is not None and record.status is RunStatus.RUNNING
    told = [e.message for e in decision.effects if isinstance(e, TellOutside)]
    assert [r for r in told if isinstance(r, SpawnReply)] == [decision.reply[2]]
    _memory_matches_the_store(driven, store)


def test_a_steps_spawns_answer_each_when_one_admission_raises() -> None:
    driven, store = _driven()
    [parent, _] = driven.spawn(SpawnRequest(request_id=new_id("q"), agent="lead", task="t"))
    assert parent.run_id is not None
    agents = ["worker", "broken", "critic"]
    reqs = [
        SpawnRequest(
            request_id=new_id("q"), agent=a, task="t", parent_run_id=parent.run_id, attempt=1
        )
        for a in agents
    ]
    decision = driven._do(driven.core.spawn_many(reqs))
    admitted = _check(decision.reply, agents)
    told = [e.message for e in decision.effects if isinstance(e, Tell)]
    assert told == list(decision.reply)  # the parent hears each of its spawns, in order
    for run_id in admitted:
        record = store.get_run(run_id)
        assert record is not None and record.parent_run_id == parent.run_id
    _memory_matches_the_store(driven, store)


def test_a_run_left_held_by_a_failed_admission_is_recorded_failed() -> None:
    """The admission raises once its run is held (here: the definition's topics are not
    names, found as the run subscribes to them): that run is answered as admitted and
    ends at once, failed with the error, recorded so and its slot freed; the batch's
    others go on."""
    tangled = AgentSpec(name="tangled", description="", topics=(["news"],))  # type: ignore[arg-type]
    specs = {**SPECS, "tangled": tangled}
    store = MemoryStore()
    core = SupervisorCore(
        lookup=specs.get,
        names=lambda: list(specs),
        read_run=store.get_run,
        limits=Limits(max_concurrency=20, max_children=10, queue_bound=100),
        clock=lambda: 1000.0,
    )
    driven = Driven(core, store)
    [parent, _] = driven.spawn(SpawnRequest(request_id=new_id("q"), agent="lead", task="t"))
    assert parent.run_id is not None
    reqs = [
        SpawnRequest(
            request_id=new_id("q"), agent=a, task="t", parent_run_id=parent.run_id, attempt=1
        )
        for a in ("worker", "tangled", "critic")
    ]
    decision = driven._do(driven.core.spawn_many(reqs))
    assert all(r.error is None and r.run_id is not None for r in decision.reply)
    left = decision.reply[1].run_id
    assert left is not None
    record = store.get_run(left)
    assert record is not None and record.status is RunStatus.FAILED
    assert record.outcome is not None and record.outcome.error_kind == "supervisor"
    assert "could not handle" in (record.outcome.error or "")
    assert not driven.slots.holds(left)
    told = [e.message for e in decision.effects if isinstance(e, Tell)]
    replies = [m for m in told if isinstance(m, SpawnReply)]
    assert replies == list(decision.reply)  # its reply before its end
    assert told.index(decision.reply[1]) < next(
        i for i, m in enumerate(told) if getattr(m, "outcome", None) is not None
    )
    started = {e.record.run_id for e in decision.effects if isinstance(e, StartRun)}
    assert started == {decision.reply[0].run_id, decision.reply[2].run_id}
    _memory_matches_the_store(driven, store)
