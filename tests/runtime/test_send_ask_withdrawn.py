"""A ``Runtime.send`` whose ask times out is withdrawn, never delivered behind its caller's back.

Before: the caller got ``TimeoutError`` but its ``SendMail`` stayed in the supervisor's inbox
and was delivered later, so a caller that sent again (the natural answer to a timeout)
delivered the mail twice. Now the send is claimed like ``spawn_many``'s ask
(``actors/ask_claims``): one the supervisor had not taken when the wait ran out is dropped.

The supervisor is held by an event subscriber (on the supervisor's thread) blocking on an
``Event``; the send's timeout is made short (``SupervisorRequests.send_timeout``), never slept on.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from subagents.behaviour.function import AgentContext, FunctionAgent
from subagents.messages import RunStatus
from subagents.runtime import Runtime
from subagents.store.sqlite import SQLiteStore

from .conftest import WAIT
from .test_spawn_ask_withdrawn import Holder, quick


async def listen(ctx: AgentContext) -> str:
    mail = await ctx.receive(timeout=WAIT)
    assert mail is not None
    return str(mail.content)


def test_a_send_the_supervisor_had_not_taken_is_withdrawn_never_delivered(
    tmp_path: Path,
) -> None:
    agents = [FunctionAgent.create("listen", listen), FunctionAgent.create("hold", quick)]
    holder = Holder("hold")
    with Runtime(agents, store=SQLiteStore(tmp_path / "runs.db")) as rt:
        listener = rt.spawn("listen", "answer with the first mail you get")
        rt.subscribe(holder)
        try:
            held = rt.spawn("hold", "the supervisor is held at its first event")
            assert holder.holding.wait(WAIT)
            rt._requests.send_timeout = 0.1
            with pytest.raises(TimeoutError, match="the mail was not sent"):
                rt.send(listener.run_id, "first")
        finally:
            holder.gate.set()
        assert held.result(timeout=WAIT).status is RunStatus.COMPLETED
        rt._requests.send_timeout = 30.0
        # handled in order: the withdrawn send was dropped before this one was taken
        rt.send(listener.run_id, "second")
        outcome = listener.result(timeout=WAIT)
        assert outcome.status is RunStatus.COMPLETED
        assert outcome.result == "second"
