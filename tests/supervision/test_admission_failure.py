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


def _core(specs: dict[str, AgentSpec], **limits: int) -> tuple[Driven, MemoryStore]:
    store = MemoryStore()
    core = SupervisorCore(
        lookup=specs.get,
        names=lambda: list(specs),
        read_run=store.get_run,
        limits=Limits(**{"max_concurrency": 20, "max_children": 10, "queue_bound": 100, **limits}),
        clock=lambda: 1000.0,
    )
    return Driven(core, store), store


def test_an_admission_that_raises_after_taking_a_slot_gives_it_back() -> None:
    """The admission raises once its run took a slot but before the run is held (here: the
    definition's timeout is no number, found as its record is made): the slot is free
    again, so the run after it starts (one slot in all) rather than waiting for ever
    behind a run that does not exist."""
    late = AgentSpec(name="late", description="", timeout="soon")  # type: ignore[arg-type]
    specs = {**SPECS, "late": late}
    driven, store = _core(specs, max_concurrency=1)
    reqs = [SpawnRequest(request_id=new_id("q"), agent=a, task="t") for a in ("late", "worker")]
    decision = driven._do(driven.core.spawn_many(reqs))
    assert decision.reply[0].error is not None and "could not handle" in decision.reply[0].error
    worker = decision.reply[1].run_id
    assert worker is not None
    record = store.get_run(worker)
    assert record is not None and record.status is RunStatus.RUNNING  # (was: queued)
    assert driven.slots.in_flight == 1 and driven.slots.holds(worker)
    # one spawn alone alike
    [reply, _] = driven.spawn(SpawnRequest(request_id=new_id("q"), agent="late", task="t"))
    assert reply.error is not None and "could not handle" in reply.error
    assert driven.slots.in_flight == 1 and not driven.slots.queued()
    _memory_matches_the_store(driven, store)


def test_a_sibling_after_a_failed_admission_that_failed_their_parent_is_refused() -> None:
    """A run left held by a failed admission ends failed at once; a ``fail_parent`` one
    fails its parent with it. A sibling of the batch after it, of an agent vetted before
    it, is then refused (its requester ended), not started under a failed parent (the
    batch's vetting, made while the parent was live, is not reused)."""
    tangled = AgentSpec(
        name="tangled",
        description="",
        topics=(["news"],),  # type: ignore[arg-type]
        on_failure="fail_parent",
    )
    driven, store = _core({**SPECS, "tangled": tangled})
    [parent, _] = driven.spawn(SpawnRequest(request_id=new_id("q"), agent="lead", task="t"))
    assert parent.run_id is not None
    reqs = [
        SpawnRequest(
            request_id=new_id("q"), agent=a, task="t", parent_run_id=parent.run_id, attempt=1
        )
        for a in ("worker", "tangled", "worker")
    ]
    decision = driven._do(driven.core.spawn_many(reqs))
    record = store.get_run(parent.run_id)
    assert record is not None and record.status is RunStatus.FAILED
    last = decision.reply[2]
    assert last.run_id is None and last.error is not None, last  # (was: running)
    for run_id in (r.run_id for r in decision.reply if r.run_id is not None):
        record = store.get_run(run_id)
        assert record is not None and record.status.terminal
    _memory_matches_the_store(driven, store)


def test_one_spawn_whose_admission_raises_once_held_is_recorded_failed() -> None:
    """A spawn decided alone (a root told with none behind it, a step's one spawn, a
    continuation) is answered as a batch's is: its run, held when its admission raised,
    ends failed at once, recorded so (its ``spawned`` event, then its ``failed``), its slot
    freed; memory keeps no run the store has not. Before, the error went up to the actor
    and the run stayed held in memory, holding its slot, with no record in the store."""
    tangled = AgentSpec(name="tangled", description="", topics=(["news"],))  # type: ignore[arg-type]
    driven, store = _core({**SPECS, "tangled": tangled}, max_concurrency=1)
    [reply, _] = driven.spawn(SpawnRequest(request_id=new_id("q"), agent="tangled", task="t"))
    assert reply.run_id is not None, reply
    record = store.get_run(reply.run_id)
    assert record is not None and record.status is RunStatus.FAILED
    kinds = [str(e.kind) for e in store.events(reply.run_id)]
    assert kinds == ["spawned", "failed"], kinds
    [after, _] = driven.spawn(SpawnRequest(request_id=new_id("q"), agent="worker", task="t"))
    assert after.run_id is not None and not after.queued
    _memory_matches_the_store(driven, store)


def test_a_failed_admission_ends_no_other_parents_child_of_the_same_request_id() -> None:
    """Request ids are the requester's: two parents' children may share one. A failed
    admission whose own run was not held (the run table changed under it all the same) ends
    nothing; before, the scan for the run it left matched the request id alone and failed
    the other parent's running child."""
    driven, store = _core(SPECS)
    parents = []
    for _ in range(2):
        [parent, _] = driven.spawn(SpawnRequest(request_id=new_id("q"), agent="lead", task="t"))
        assert parent.run_id is not None
        parents.append(parent.run_id)
    same = new_id("q")
    [child, _] = driven.spawn(
        SpawnRequest(request_id=same, agent="worker", task="t", parent_run_id=parents[0])
    )
    assert child.run_id is not None
    req = SpawnRequest(request_id=same, agent="worker", task="t", parent_run_id=parents[1])
    reply, decided = driven.core.admission._failed(req, RuntimeError("a bug"), True)
    driven._do(decided)
    assert reply.run_id is None and reply.error is not None and "a bug" in reply.error
    record = store.get_run(child.run_id)
    assert record is not None and record.status is RunStatus.RUNNING
    assert driven.slots.holds(child.run_id)
    _memory_matches_the_store(driven, store)
