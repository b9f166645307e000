"""A child whose first act is to mail its parent: the parent may have that mail before what
the supervisor decided for it earlier (its sibling's end, which freed the slot the child
started in: ``supervision/coalesce.py`` lets a start go before the batches of other runs) and
must take it all the same, as mail from the child whose id its spawn handed back."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from polling import wait_until
from subagents.behaviour.function import AgentContext
from subagents.messages import Event, EventKind, Mail, RunStatus
from subagents.runtime import Runtime
from subagents.store.sqlite import SQLiteStore
from subagents.supervision.limits import Limits

from .conftest import WAIT

pytestmark = pytest.mark.usefixtures("no_new_threads")


def test_a_queued_child_that_mails_its_parent_first_thing(tmp_path: Path) -> None:
    """Two runs at once: the root and one child. The mailer waits behind the quick child and
    starts in the decision of its end (which also delivers the quick child's last mail, by
    name: two Tells, so the coalescing reorders); the supervisor is held at the mailer's
    start until the mailer's mail is recorded, so that mail may reach the root before the
    quick child's end does (seen on e-fanout12: "hello first" before the quick child's
    background result; on main after it). Either way the root gets all four, the mail from
    the very run id its spawn handed back."""
    store = SQLiteStore(tmp_path / "runs.db")
    held = threading.Event()

    async def quick(ctx: AgentContext) -> str:
        ctx.send("root", "bye")  # by name: by the supervisor, decided with this run's end
        return "quick done"

    async def mailer(ctx: AgentContext) -> str:
        ctx.send(ctx.task, "hello first")
        return "mailed"

    async def root(ctx: AgentContext) -> str:
        await ctx.spawn("quick", "go", background=True)
        mailer_id: str = await ctx.spawn("mailer", ctx.run_id, background=True)
        got: list[tuple[str, str]] = []
        for _ in range(4):  # two mails and two background results, in whatever order
            mail: Mail | None = await ctx.receive(timeout=WAIT)
            assert mail is not None
            got.append((mail.sender, mail.content))
        hello = [s for s, c in got if c == "hello first"]
        assert hello == [mailer_id], got
        return "ok"

    def hold(event: Event) -> None:  # on the supervisor's thread, right after the start
        if event.kind is EventKind.STARTED and event.agent == "mailer":
            held.set()
            wait_until(
                lambda: any(m.content == "hello first" for m in store.mail_for(event.run_id)),
                "the mailer's straight mail recorded while the supervisor is held",
            )

    with Runtime(
        {"root": root, "quick": quick, "mailer": mailer},
        store=store,
        limits=Limits(max_concurrency=2),
    ) as rt:
        rt.subscribe(hold)
        outcome = rt.spawn("root", "go").result(WAIT)
        assert outcome.status is RunStatus.COMPLETED, outcome
        assert outcome.result == "ok"
        assert held.is_set()
    store.close()
