"""A run parked in the handling that sent mail straight holds that mail's acknowledgement
until ``Unpark`` (``AgentActor._settle`` hands it as ``_one(ack, straight=True)``), with real
actors and threads.

How a run gets there: the supervisor's Tells to one run in one group are one ``Batch``
(``supervision.coalesce``), so a mail and a ``Park`` can come together: the mail wakes the
function, which sends (its mail goes straight at the handling's end), and the ``Park``
after it parks the run before that end. The Batch is told here as the supervisor would
tell it (a group whose timing no test controls); the supervisor is held meanwhile, so the
mail the run sends can only reach its recipient straight. ``Parked`` and ``SlotWanted``
from a run it did not ask to park are nothing to the supervisor (``Parking.parked``,
``slot_wanted``), so the test tells ``Unpark`` too."""

from __future__ import annotations

import threading
from typing import Any

from polling import wait_until
from subagents.behaviour.function import AgentContext
from subagents.messages import Batch, DeliverMail, Event, EventKind, Mail, MailAck, Park, Unpark
from subagents.runtime import Runtime
from subagents.store.memory import MemoryStore

from .conftest import WAIT


def test_a_parked_run_holds_its_straight_mails_ack_until_unparked() -> None:
    got: list[Mail] = []
    peer_got, ready, acked = threading.Event(), threading.Event(), threading.Event()
    held, release = threading.Event(), threading.Event()
    sent: list[str] = []
    started: dict[str, str] = {}

    async def peer(ctx: AgentContext) -> str:
        mail = await ctx.receive(timeout=WAIT)
        assert mail is not None
        got.append(mail)
        peer_got.set()
        await ctx.receive(timeout=10 * WAIT)  # (live until the close ends it)
        return "done"

    async def sender(ctx: AgentContext) -> str:
        ready.set()
        woke = await ctx.receive(timeout=WAIT)  # the Batch's mail
        assert woke is not None
        sent.append(await ctx.send(ctx.task, "reply"))  # by run id: straight to the peer
        acked.set()
        await ctx.receive(timeout=10 * WAIT)
        return "done"

    async def root(ctx: AgentContext) -> str:
        peer_id: str = await ctx.spawn("peer", "p", background=True)
        await ctx.spawn("sender", peer_id, background=True)
        await ctx.receive(timeout=10 * WAIT)
        return "done"

    def hold(event: Event) -> None:  # on the supervisor's thread, once the sender started
        if event.kind is EventKind.STARTED and event.agent in ("peer", "sender"):
            started[event.agent] = event.run_id
            if event.agent == "sender":
                held.set()
                release.wait(WAIT)

    agents = {"root": root, "peer": peer, "sender": sender}
    with Runtime(agents, store=MemoryStore()) as rt:
        rt.subscribe(hold)
        rt.spawn("root", "go")
        assert held.wait(WAIT)
        try:
            assert ready.wait(WAIT)
            client: Any = rt._hosting.supervisor
            supervisor = client._ref._actor_weakref()  # (pykka holds its actor weakly)
            listed = supervisor.effector.mail.directory.get(started["sender"])
            actor = listed.ref._actor_weakref()
            woke = Mail(
                mail_id="m-woke",
                sender=started["peer"],
                recipient=started["sender"],
                content="wake",
            )
            listed.ref.tell(Batch(messages=(DeliverMail(mails=(woke,)), Park())))
            assert peer_got.wait(WAIT), "the mail did not go straight (the supervisor is held)"
            wait_until(lambda: not actor._handling, "the Batch handled", timeout=WAIT)
            assert not acked.is_set(), "the function went on while its run was parked"
            assert [type(m) for m in actor._parked] == [MailAck], actor._parked
            listed.ref.tell(Unpark())
            assert acked.wait(WAIT), "the acknowledgement was not handed on at Unpark"
        finally:
            release.set()
        assert sent == [got[0].mail_id]
        assert got[0].sender == started["sender"]
