"""A node keeps one definition object per definition (actors/node_specs.py ``KeptSpecs``),
so the caches a run's start reads by definition object (its permission policy, its tool
offer, its spawn grant) hit on a node as on one machine. No Ray: the starts cross the link's
real codec (``cluster.link.TO_NODE``) one frame each, as the driver's would, each frame
decoding a definition object of its own; real agent actors on the node's dispatcher."""

from __future__ import annotations

import functools
import threading
import time
from typing import Any

from subagents.actors.node_specs import KeptSpecs
from subagents.actors.remote import NodeRuns
from subagents.behaviour.function import AgentContext, FunctionBehaviour
from subagents.cluster.link import EFFECTS, TO_NODE
from subagents.definitions.spec import AgentSpec
from subagents.messages import RunRecord
from subagents.supervision.effects import Effect, StartRun, Tell

WAIT_S = 30.0
WORKER = AgentSpec(name="worker", description="d", tools=("Read",), metadata={"k": [1]})


def start(run_id: str, spec: AgentSpec = WORKER) -> StartRun:
    record = RunRecord(run_id=run_id, agent=spec.name, task="t", root_run_id=run_id)
    return StartRun(record=record, spec=spec, deadline=time.time() + WAIT_S)


def across(effects: list[Effect]) -> list[Effect]:
    """``effects`` as the node reads them: packed and unpacked by the link's codec."""
    kind, _seq, items = TO_NODE.unpack(TO_NODE.pack((EFFECTS, 1, effects)))
    assert kind == EFFECTS
    return list(items)


def test_starts_of_one_definition_are_carried_out_with_one_object() -> None:
    kept = KeptSpecs()
    first, second, third = (across([start(f"r{i}")])[0] for i in range(3))
    assert isinstance(first, StartRun) and isinstance(second, StartRun)
    assert isinstance(third, StartRun)
    assert first.spec is not second.spec  # what the link gives: an object per frame
    (a,) = kept.same([first])
    tell = Tell("r0", "hello")
    b, told, c = kept.same([second, tell, third])
    assert isinstance(a, StartRun) and isinstance(b, StartRun) and isinstance(c, StartRun)
    assert a.spec is b.spec is c.spec is first.spec
    assert told is tell
    assert b == second and c == third  # nothing else changed: the record, the deadline...


def test_a_definition_that_differs_is_its_own_and_kept_from_then_on() -> None:
    kept = KeptSpecs()
    old = across([start("r0")])[0]
    reloaded = AgentSpec(name="worker", description="d", tools=("Read", "Bash"))
    new, after = across([start("r1", reloaded), start("r2", reloaded)])
    assert isinstance(old, StartRun) and isinstance(new, StartRun)
    assert isinstance(after, StartRun)
    kept.same([old])
    (got,) = kept.same([new])
    assert isinstance(got, StartRun)
    assert got.spec is new.spec and got.spec == reloaded  # never the older definition
    (later,) = kept.same([after])
    assert isinstance(later, StartRun) and later.spec is new.spec


def test_nothing_to_replace_gives_the_same_sequence() -> None:
    kept = KeptSpecs()
    effects = [start("r0")]
    assert kept.same(effects) is effects
    assert kept.same(effects) is effects  # its definition is the kept object itself


def test_a_node_starts_each_run_of_a_definition_with_the_one_object() -> None:
    seen: list[AgentSpec] = []
    both = threading.Condition()

    async def worker(ctx: AgentContext) -> str:
        return "done"

    def behaviour_for(spec: AgentSpec) -> Any:
        with both:
            seen.append(spec)
            both.notify_all()
        return functools.partial(FunctionBehaviour, worker)

    runs = NodeRuns(behaviour_for)
    try:
        for run_id in ("r1", "r2", "r3"):
            runs.deliver(across([start(run_id)]))  # one frame each, as the link reads them
        with both:
            assert both.wait_for(lambda: len(seen) >= 3, WAIT_S), seen
        assert all(spec is seen[0] for spec in seen), [id(spec) for spec in seen]
    finally:
        runs.close()


def test_a_definition_equal_by_value_but_not_the_same_is_not_replaced() -> None:
    """``==`` holds ``1 == True == 1.0`` in a definition's free-form fields (hooks, MCP
    servers, metadata): a hook's ``timeout: true`` (refused: the runs fail) fixed to
    ``timeout: 1`` and reloaded compares equal to the kept one, and must not run with it."""

    def hooked(timeout: Any) -> AgentSpec:
        hook = {"type": "command", "command": "true", "timeout": timeout}
        return AgentSpec(
            name="worker",
            description="d",
            hooks={"PreToolUse": [{"matcher": "Bash", "hooks": [hook]}]},
            metadata={"flag": timeout},
        )

    kept = KeptSpecs()
    bad, fixed, again = across(
        [start("r0", hooked(True)), start("r1", hooked(1)), start("r2", hooked(1))]
    )
    assert isinstance(bad, StartRun) and isinstance(fixed, StartRun)
    assert isinstance(again, StartRun)
    assert bad.spec == fixed.spec  # what ``==`` says: the reason for this test
    kept.same([bad])
    (got,) = kept.same([fixed])
    assert isinstance(got, StartRun) and got.spec is fixed.spec
    assert got.spec.metadata["flag"] is not True
    (later,) = kept.same([again])
    assert isinstance(later, StartRun) and later.spec is fixed.spec  # kept from then on


def test_a_definition_that_cannot_be_encoded_is_carried_out_as_itself() -> None:
    kept = KeptSpecs()
    odd = AgentSpec(name="worker", description="d", metadata={"f": object()})
    effects: list[Effect] = [start("r0", odd), start("r1", odd)]
    assert kept.same(effects) is effects
