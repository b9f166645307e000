"""A function agent's ``ctx.send`` of the wrong types is refused at the call, awaited or
not, before anything is journaled: a mail whose content is not a string was told only to an
``await`` (``MailError``), so a send not awaited (a mail stream's) was lost without a word,
its sender going on as if it had been sent."""

from __future__ import annotations

from typing import Any

import pytest

from subagents import FunctionAgent, Runtime
from subagents.behaviour.function import AgentContext
from subagents.messages import RunStatus
from subagents.store.memory import MemoryStore

from .conftest import WAIT

pytestmark = pytest.mark.usefixtures("no_new_threads")

WRONG: dict[str, tuple[Any, Any, Any]] = {
    "content int": ("", 5, None),
    "content None": ("", None, None),
    "content bytes": ("", b"x", None),
    "to int": (7, "text", None),
    "reply_to int": ("", "text", 3),
}


class Words(str):
    """A subclass of ``str``: sent as any string."""


async def receiver(ctx: AgentContext) -> str:
    mail = await ctx.receive(timeout=WAIT)
    return "nothing" if mail is None else f"got {mail.content}"


async def sender(ctx: AgentContext) -> str:
    """Each wrong send unawaited to its background child, then a right one; what each
    said, and what the child got (its result's mail)."""
    child: str = await ctx.spawn("receiver", "r", background=True)
    said: list[str] = []
    for to, content, reply_to in WRONG.values():
        try:
            ctx.send(to or child, content, reply_to)
        except TypeError as exc:
            said.append(str(exc))
        else:
            said.append("sent")
    await ctx.send(child, Words("right"))  # (a str subclass is a string)
    result = await ctx.receive(timeout=WAIT)  # (the child's ``[background result]``)
    said.append("nothing" if result is None else result.content)
    return " | ".join(said)


def test_a_send_of_the_wrong_types_raises_at_the_call_and_loses_nothing_else() -> None:
    with Runtime(
        [FunctionAgent.create("receiver", receiver), FunctionAgent.create("sender", sender)],
        store=MemoryStore(),
    ) as rt:
        outcome = rt.run("sender", "s", wait=WAIT)
        assert outcome.status is RunStatus.COMPLETED, outcome.error
        *said, child = str(outcome.result).split(" | ")
        assert said == [
            "send(): to and content must be strings, got str and int",
            "send(): to and content must be strings, got str and NoneType",
            "send(): to and content must be strings, got str and bytes",
            "send(): to and content must be strings, got int and str",
            "send(): reply_to must be a string, got int",
        ]
        assert "got right" in child, child
