"""An ended LLM run leaves no reference cycle: its behaviour, tool calls and inbox are freed
by reference counting when its actor stops, not left for the cyclic GC.

Why it matters: a fan-out's 1,000 children each left ~24 objects of cyclic garbage (the
approval flows held the behaviour's bound methods), and so its actor half the time; the
garbage counted towards every young pass's threshold and was walked by the middle passes
(1,000 x 50 ms, 100 at once: 98 young and 9 middle passes, 11.5 objects collected per child).

Real runtime, real actors, the real collector (``gc.DEBUG_SAVEALL`` keeps what it finds
unreachable, for the test to look at); the collector's state is restored after.
"""

from __future__ import annotations

import gc

from subagents.behaviour.llm import LLMBehaviour
from subagents.definitions.spec import AgentSpec
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime
from subagents.store.memory import MemoryStore

from .conftest import WAIT

AGENT = "cycle-free"


def test_an_ended_llm_runs_behaviour_is_not_left_to_the_cyclic_gc() -> None:
    spec = AgentSpec(name=AGENT, description="One turn, no tools.", tools=())
    model = ScriptedModel({AGENT: [{"text": "done"}]})
    gc.collect()  # what earlier tests left unreachable is freed now, not looked at below
    enabled, flags = gc.isenabled(), gc.get_debug()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        with Runtime([spec], model=model, store=MemoryStore()) as rt:
            outcomes = [rt.run(AGENT, f"part {i}", wait=WAIT) for i in range(3)]
        # closed: every actor has stopped (its behaviour closed and let go)
        gc.collect()
        left = [o for o in gc.garbage if type(o) is LLMBehaviour and o.port.spec.name == AGENT]
    finally:
        gc.set_debug(flags)
        gc.garbage.clear()
        if enabled:
            gc.enable()
    assert [o.status.value for o in outcomes] == ["completed"] * 3
    assert left == []
