"""A waiting run's agent actor keeps its attributes in a dict whose keys every agent actor
of its class shares (CPython's split dicts: the values only, ~0.25 KiB) rather than a
combined dict of its own (~0.8 KiB), paid by every waiting run (benchmarks/scale.py): past
30 distinct keys among a class's instances, new ones get combined dicts. ``AgentActor``
reads its supervisor, timer, pool and mail desk from its ``AgentKit`` (one attribute) to have
room for the start's fields it copies (``Started``).

The runs are started in a fresh interpreter: which keys a class's instances share is state
of the process. CPython 3.11 takes one from the room left for new keys at each instance it
makes (down to one), so a key first set after a class has some thirty instances gets a
combined dict (checked with a plain class: after 40 instances, one new name joins the shared
keys, the next do not); other tests' actors (test_agent_end's, then test_base_exceptions')
leave the agents' classes there, and even the base tree's actors get combined dicts (seen on
15dd97b too). A long-lived runtime whose first thirty-odd runs never set a key that later
runs set (sixty trivial runs, then waiting runs: none of these share, base and branch) is in
the same state.

Real runtime, real actors, a real subprocess: runs of several kinds wait at once (on mail,
on a wake, after mailing a child), and their actors are found among the live objects.
"""

from __future__ import annotations

import pytest

from shared_keys import assert_keys_shared, run_scenario

from .conftest import WAIT

_SCENARIO = """
import gc, json, sys
from polling import wait_until
from subagents.actors.pooled_agent import PooledAgentActor
from subagents.runtime import Runtime
from subagents.store.memory import MemoryStore

WAIT, FIRST = float(sys.argv[1]), int(sys.argv[2])

def trivial(ctx):
    return "done"

async def listener(ctx):
    mail = await ctx.receive(timeout=WAIT)
    return mail.content if mail is not None else "no mail"

async def sleeper(ctx):
    await ctx.sleep(0.01)
    mail = await ctx.receive(timeout=WAIT)
    return mail.content if mail is not None else "no mail"

async def mailer(ctx):
    child = await ctx.spawn("listener", "wait", background=True)
    await ctx.send(child, "hello")
    await ctx.receive(timeout=WAIT)  # the child's report
    mail = await ctx.receive(timeout=WAIT)
    return mail.content if mail is not None else "no mail"

with Runtime([trivial, listener, sleeper, mailer], store=MemoryStore()) as rt:
    for _ in range(FIRST):  # runs that never wait nor mail, first
        rt.run("trivial", "now", wait=WAIT)
    handles = [rt.spawn(agent, "wait") for agent in ("listener", "sleeper", "mailer") * 2]
    ids = {h.run_id for h in handles}
    wait_until(lambda: sum(1 for r in rt.runs() if r.status == "waiting") == 6, WAIT)
    actors = [
        o for o in gc.get_objects()
        if type(o) is PooledAgentActor and not o._ended and o.record.run_id in ids
    ]
    # a split dict holds its values only: smaller than the same items in a dict of their
    # own (equal sizes once it has become one)
    sizes = [(sys.getsizeof(a.__dict__), sys.getsizeof(dict(a.__dict__))) for a in actors]
    keys = sorted(actors[0].__dict__) if actors else []
    for h in handles:
        rt.send(h.run_id, "done")
    statuses = [h.result(WAIT).status.value for h in handles]
print(json.dumps({"sizes": sizes, "keys": keys, "statuses": statuses}))
"""


@pytest.mark.parametrize("first", [0, 60])
def test_a_waiting_runs_actor_shares_its_attribute_keys_with_the_others(first: int) -> None:
    """``first``: trivial runs the runtime ran before (60: more instances than CPython lets
    a class's shared keys grow after)."""
    assert_keys_shared(run_scenario(_SCENARIO, WAIT, first, 2 * WAIT), 6)
