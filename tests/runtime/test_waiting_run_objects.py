"""A run's ``DirectMail`` (its mail taken straight to recipients, ``actors/mail_desk.py``) is
made at the first flush of its reports that it takes or notes: mail, a journal, a spawn or a
stop asked. A waiting run's first flush is its ``WaitingChanged`` alone: it makes none (two
objects and their fields more for each of 100,000 waiting runs, ``benchmarks/scale.py``);
one is made later, when the run mails (its mail delivered and recorded as before).

A waiting function run's behaviour holds no list of its groups (``gather``, ``wait_any``)
nor set of its brief sleeps until it makes one: an empty tuple and a shared empty frozenset,
one for every run (each was an object of every waiting run, walked by the GC).

Real runtime, real actors: the objects are found among the live ones."""

from __future__ import annotations

import gc

import pytest

from polling import wait_until
from subagents.actors.mail_desk import DirectMail
from subagents.behaviour.function import AgentContext, FunctionBehaviour
from subagents.messages import EventKind
from subagents.runtime import Runtime
from subagents.store.memory import MemoryStore

from .conftest import WAIT

pytestmark = pytest.mark.usefixtures("no_new_threads")


async def lead(ctx: AgentContext) -> str:
    """Spawns three relays (its own first flush asks: it has a ``DirectMail``), then waits
    for the three mails they relay."""
    for i in range(3):
        await ctx.spawn("relay", f"relay {i}", background=True)
    got: list[str] = []
    while len(got) < 3:  # (each relay's end comes as mail too: not counted)
        mail = await ctx.receive(timeout=WAIT)
        if mail is None:
            return "no mail"
        if str(mail.content).startswith("m"):
            got.append(str(mail.content))
    return ",".join(sorted(got))


async def relay(ctx: AgentContext) -> str:
    """Waits for a mail, then mails its content to its parent."""
    mail = await ctx.receive(timeout=WAIT)
    assert mail is not None and ctx.parent_run_id is not None
    await ctx.send(ctx.parent_run_id, str(mail.content))
    return "sent"


def _direct_mails(ids: set[str]) -> int:
    return sum(1 for o in gc.get_objects() if type(o) is DirectMail and o.record.run_id in ids)


def test_a_waiting_run_makes_no_direct_mail_until_it_mails() -> None:
    waiting: list[str] = []
    with Runtime([lead, relay], store=MemoryStore()) as rt:
        rt.subscribe(lambda e: waiting.append(e.run_id), {EventKind.WAITING})
        root = rt.spawn("lead", "gather")
        wait_until(lambda: len(set(waiting)) == 4, WAIT)  # the lead and its three relays
        relays = {r.run_id for r in rt.runs() if r.parent_run_id == root.run_id}
        assert len(relays) == 3
        assert _direct_mails(relays) == 0  # (before: one per waiting relay)
        assert _direct_mails({root.run_id}) == 1
        for i, run_id in enumerate(sorted(relays)):
            rt.send(run_id, f"m{i}")
        assert root.result(WAIT).result == "m0,m1,m2"


async def grouping(ctx: AgentContext) -> str:
    """Waits, then gathers two sleeps (one brief) and waits for mail again."""
    first = await ctx.receive(timeout=WAIT)
    assert first is not None
    await ctx.gather(ctx.sleep(0.01), ctx.sleep(0.02))
    mail = await ctx.receive(timeout=WAIT)
    return f"{first.content},{mail.content if mail is not None else 'no mail'}"


def _behaviours(ids: set[str]) -> list[FunctionBehaviour]:
    return [
        o for o in gc.get_objects() if type(o) is FunctionBehaviour and o.port.record.run_id in ids
    ]


def test_a_waiting_run_holds_no_list_of_groups_nor_set_of_brief_sleeps() -> None:
    waiting: list[str] = []
    with Runtime([grouping], store=MemoryStore()) as rt:
        rt.subscribe(lambda e: waiting.append(e.run_id), {EventKind.WAITING})
        handles = [rt.spawn("grouping", "wait") for _ in range(3)]
        ids = {h.run_id for h in handles}
        wait_until(lambda: ids <= set(waiting), WAIT)
        behaviours = _behaviours(ids)
        assert len(behaviours) == 3
        # (before: a list and a set each, walked by the GC)
        assert not any(gc.is_tracked(b.groups) for b in behaviours)
        assert len({id(b.brief_sleeps) for b in behaviours}) == 1  # one shared, empty
        for handle in handles:
            handle.send("a")
        wait_until(lambda: all(b.groups == () for b in behaviours), WAIT)  # gathered
        for handle in handles:
            handle.send("b")
        assert [h.result(WAIT).result for h in handles] == ["a,b"] * 3
