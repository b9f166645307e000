"""A waiting LLM run's behaviour keeps its attributes in a dict whose keys every
``LLMBehaviour`` shares (CPython's split dicts: the values only) rather than a combined dict
of its own, paid by every waiting LLM run. CPython 3.11 takes one from a class's room for
new shared keys at each instance it makes (down to one; test_agent_attributes), so a name a
run first sets late (its turn count, its pending calls' order, ``waiting``), after some
thirty runs that never set it, gives every later run that sets it a combined dict: every
name a run may set is set by the constructor.

Real runtime, real actors, a real subprocess (which keys a class's instances share is state
of the process): sixty one-turn runs first, then runs that wait for mail in a tool call.
"""

from __future__ import annotations

import pytest

from shared_keys import assert_keys_shared, run_scenario

from .conftest import WAIT

_SCENARIO = """
import gc, json, sys
from polling import wait_until
from subagents.behaviour.llm import LLMBehaviour
from subagents.definitions.spec import AgentSpec
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime
from subagents.store.memory import MemoryStore

WAIT, FIRST = float(sys.argv[1]), int(sys.argv[2])
model = ScriptedModel({
    "worker": [{"text": "done"}],
    "listener": [
        {"tool_calls": [{"name": "wait_for_message", "input": {"timeout": WAIT}}]},
        {"text": "heard"},
    ],
})
specs = [
    AgentSpec(name="worker", description="One turn, no tools.", tools=()),
    AgentSpec(name="listener", description="Waits for mail.", tools=("wait_for_message",)),
]
with Runtime(specs, model=model, store=MemoryStore()) as rt:
    for _ in range(FIRST):  # runs that never call a tool, first
        rt.run("worker", "now", wait=WAIT)
    handles = [rt.spawn("listener", "wait") for _ in range(3)]
    wait_until(lambda: sum(1 for r in rt.runs() if r.status == "waiting") == 3, WAIT)
    waiting = [o for o in gc.get_objects() if type(o) is LLMBehaviour and not o.ended]
    # a split dict holds its values only: smaller than the same items in a dict of their
    # own (equal sizes once it has become one)
    sizes = [(sys.getsizeof(b.__dict__), sys.getsizeof(dict(b.__dict__))) for b in waiting]
    keys = sorted(waiting[0].__dict__) if waiting else []
    for h in handles:
        rt.send(h.run_id, "done")
    statuses = [h.result(WAIT).status.value for h in handles]
print(json.dumps({"sizes": sizes, "keys": keys, "statuses": statuses}))
"""


@pytest.mark.parametrize("first", [0, 60])
def test_a_waiting_llm_runs_behaviour_shares_its_attribute_keys(first: int) -> None:
    """``first``: one-turn runs the runtime ran before (60: more instances than CPython lets
    a class's shared keys grow after)."""
    assert_keys_shared(run_scenario(_SCENARIO, WAIT, first, 4 * WAIT), 3)
