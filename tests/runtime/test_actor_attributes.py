"""A live run's agent actor keeps few attributes of its own. Why a test: CPython shares the
keys of an instance dict among a class's instances up to 30 keys, fewer as it makes more
instances (one less room each, down to one: test_agent_attributes); a waiting run's actor
held 29-33 and each had a dict of its own (``scale.py``: ~0.7 KiB more per waiting run, of
~11). Every key a handling may set is set by its constructor (27: all in the shared keys
before a second instance is made, whatever runs come first); an attribute added to every
run's actor shows here first."""

from __future__ import annotations

import gc

from polling import wait_until
from subagents.actors.agent import AgentActor
from subagents.behaviour.function import AgentContext, FunctionAgent
from subagents.messages import RunStatus
from subagents.runtime import Runtime

WAIT = 60.0
MOST = 27
"""Attributes of its own a waiting run's actor may hold (27 now; CPython shares at most 29 set
by a class's first instance)."""


async def waits(ctx: AgentContext) -> str:
    mail = await ctx.receive(timeout=WAIT)
    return "none" if mail is None else mail.content


def test_a_waiting_runs_actor_holds_few_attributes_of_its_own() -> None:
    with Runtime([FunctionAgent.create("waits", waits)]) as rt:
        handle = rt.spawn("waits", "t")
        wait_until(lambda: handle.status is RunStatus.WAITING, "the run waits", timeout=WAIT)
        [actor] = [
            o
            for o in gc.get_objects()
            if isinstance(o, AgentActor) and o.record.run_id == handle.run_id
        ]
        own = sorted(vars(actor))
        assert len(own) <= MOST, own
        # the start's fields, read through the actor as before
        assert (actor.record.agent, actor.spec.name, actor.attempt) == ("waits", "waits", 1)
        handle.send("done")
        assert handle.result(WAIT).result == "done"
