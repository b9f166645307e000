"""A ping-pong nobody subscribed to hands the event bus no mail events: the runtime makes its
core with ``Subscribers.wants`` (``supervisor_core(published=...)``), and the core's
``Recorded`` asks it before publishing a straight mail's two events; and its effector with
``Subscribers.heard``, so that no event of a kind nobody takes reaches the bus. Were the runtime to
forget it (the line that set ``core.recorded_parts.published`` from outside, dropped), every
mail would be published again to nobody: correct, slower, and caught only here.

Real runtime, real actors; what the supervisor hands ``Subscribers.publish`` is counted by
kind on the way through (the real ``publish`` still runs: the runtime's own end waiters are
woken by it). The store keeps every mail event either way (``test_event_kinds.py``).
"""

from __future__ import annotations

import collections
from typing import Any

import pytest

from subagents.behaviour.function import AgentContext
from subagents.messages import Event, EventKind, RunStatus
from subagents.runtime import Runtime
from subagents.runtime._services import Subscribers
from subagents.store.memory import MemoryStore

from .conftest import WAIT

pytestmark = pytest.mark.usefixtures("no_new_threads")

ROUNDS = 20
MAIL_KINDS = (EventKind.MAIL_SENT, EventKind.MAIL_DELIVERED)


async def ponger(ctx: AgentContext) -> str:
    for _ in range(ROUNDS):
        mail = await ctx.receive(timeout=WAIT)
        assert mail is not None
        await ctx.send(mail.sender, "pong")
    return "ponged"


async def pinger(ctx: AgentContext) -> str:
    for _ in range(ROUNDS):
        await ctx.send(ctx.task, "ping")  # by run id: straight to it
        mail = await ctx.receive(timeout=WAIT)
        assert mail is not None and mail.content == "pong"
    return "pinged"


async def table(ctx: AgentContext) -> str:
    ponging: str = await ctx.spawn("ponger", "pong", background=True)
    pinged = await ctx.spawn("pinger", ponging)  # one tree: its mail goes straight
    return f"{pinged.status}"


def test_a_ping_pong_nobody_subscribed_to_publishes_no_mail_events(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    handed: collections.Counter[EventKind] = collections.Counter()
    publish = Subscribers.publish

    def counted(self: Subscribers, event: Event) -> Any:
        handed[event.kind] += 1
        return publish(self, event)

    monkeypatch.setattr(Subscribers, "publish", counted)  # (before the supervisor takes it)
    agents = {"table": table, "pinger": pinger, "ponger": ponger}
    with Runtime(agents, store=MemoryStore()) as rt:
        done = rt.spawn("table", "go").result(timeout=WAIT)
        assert (done.status, done.result) == (RunStatus.COMPLETED, "completed"), done
        kept = [
            e
            for r in rt.store.list_runs(root_run_id=done.run_id)
            for e in rt.store.events(r.run_id)
        ]
    mails = sum(1 for e in kept if e.kind is EventKind.MAIL_SENT)
    assert mails >= 2 * ROUNDS  # (every ping and pong kept by the store)
    # the bus was counted: the pinger's end went by (the runtime's own ``Endings`` takes a
    # run's end; an end may be published after the table's outcome is handed out)
    assert handed[EventKind.COMPLETED] >= 1, handed
    # no event of a kind nobody takes: the effector hands on only those someone does
    # (``Subscribers.heard``); before, every run's spawned and started went by (3 + 3, seen)
    assert not any(handed[k] for k in (EventKind.SPAWNED, EventKind.STARTED)), handed
    # no straight mail's: neither one in a line (``Recorded.all``) nor one decided alone
    # (``SupervisorCore.mails_posted`` -> ``Recorded.posted``, which asks too: 4 were handed
    # before it did, seen), nor the one mail the supervisor routes itself (the first, before
    # the sender knows a straight route: 2 handed before ``heard``, seen); with the runtime
    # not passing who listens, all 2 x 2 x ROUNDS were (82, seen)
    assert sum(handed[kind] for kind in MAIL_KINDS) == 0, handed
