"""A waiting run's agent actor keeps its attributes in a dict whose keys every agent actor
of its class shares (CPython's split dicts: the values only, ~0.25 KiB): past 30 keys in all
its instances' dicts, each actor gets a combined dict of its own (~0.8 KiB), paid by every
waiting run (benchmarks/scale.py). ``AgentActor`` reads its supervisor, timer, pool and mail
desk from its ``AgentKit`` (one attribute) to have room for the start's fields it copies.

Real runtime, real actors: runs of several kinds wait at once (on mail, on a wake, after
mailing another run), and their actors are found among the live objects.
"""

from __future__ import annotations

import gc
import sys

from polling import wait_until
from subagents.actors.agent import PooledAgentActor
from subagents.behaviour.function import AgentContext
from subagents.runtime import Runtime
from subagents.store.memory import MemoryStore

from .conftest import WAIT


async def listener(ctx: AgentContext) -> str:
    """Waits for mail."""
    mail = await ctx.receive(timeout=WAIT)
    return mail.content if mail is not None else "no mail"


async def sleeper(ctx: AgentContext) -> str:
    """Waits on a wake, then for mail."""
    await ctx.sleep(0.01)
    mail = await ctx.receive(timeout=WAIT)
    return mail.content if mail is not None else "no mail"


async def mailer(ctx: AgentContext) -> str:
    """Starts a listener, mails it, takes its report, then waits for mail."""
    child = await ctx.spawn("listener", "wait", background=True)
    await ctx.send(child, "hello")
    await ctx.receive(timeout=WAIT)  # the child's report
    mail = await ctx.receive(timeout=WAIT)
    return mail.content if mail is not None else "no mail"


def _live_actors() -> list[PooledAgentActor]:
    return [o for o in gc.get_objects() if type(o) is PooledAgentActor and not o._ended]


def test_a_waiting_runs_actor_shares_its_attribute_keys_with_the_others() -> None:
    with Runtime([listener, sleeper, mailer], store=MemoryStore()) as rt:
        handles = [rt.spawn("listener", "wait") for _ in range(2)]
        handles += [rt.spawn("sleeper", "wait") for _ in range(2)]
        handles += [rt.spawn("mailer", "wait") for _ in range(2)]
        wait_until(lambda: sum(1 for r in rt.runs() if r.status == "waiting") == 6, WAIT)
        actors = _live_actors()
        assert len(actors) == 6
        for actor in actors:
            own = actor.__dict__
            # a split dict holds its values only: smaller than the same items in a dict of
            # their own (equal sizes once it has become one)
            assert sys.getsizeof(own) < sys.getsizeof(dict(own)), sorted(own)
        for h in handles:
            rt.send(h.run_id, "done")
        for h in handles:
            assert h.result(WAIT).status == "completed"
