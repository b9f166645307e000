"""NodeAsks: a node's asks of the supervisor, put in its inbox in the order the node's
link brought them; only their answers are waited for on a pool of threads.

Why: a node's agents tell and ask the driver's supervisor over one link, in order. The driver
hands a told report to the supervisor at once, from the link's reading thread, and answers an
ask from a small pool of threads, so that a slow answer does not hold the node's other reports
back (``cluster.hosting``). Were the ask itself put in the supervisor's inbox by the pool's
thread, what the node told after it could come first: with every pool thread waiting on a
stalled supervisor, an ask waits in the pool's queue while the node's reports go on. A model
turn's step whose ask timed out sends the turn's mail by the supervisor, behind the step
(``actors.agent._unrecorded``): that mail would be decided and committed before the step it
came from, and a crash between the two would keep the mail and lose the turn (the resumed run
takes the turn again and, with a real model, mails again). So the ask goes into the inbox at
once (pykka's ask without blocking: it is queued, not handled, on the reading thread), in the
link's order, and a pool thread waits for its answer.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any

import pykka

from subagents.actors.remote import Answer

ANSWER_TIMEOUT_S = 60.0
"""How long the driver waits for the supervisor's answer to a node's ask (the node's own ask
gives up earlier: ``actors.agent.ASK_TIMEOUT_S``)."""


class NodeAsks:
    """A node's asks handed to the supervisor in order, answered off the reading thread."""

    __slots__ = ("_pool", "_supervisor", "timeout_s")

    def __init__(
        self,
        supervisor: pykka.ActorRef[Any],
        pool: Executor,
        timeout_s: float = ANSWER_TIMEOUT_S,
    ) -> None:
        self._supervisor = supervisor
        self._pool = pool
        self.timeout_s = timeout_s

    def ask(self, key: int, message: Any, reply: Callable[[Answer], None]) -> None:
        """Put ``message`` (the node's ask numbered ``key``) in the supervisor's inbox now,
        behind what the link brought before it; ``reply`` gets its answer (or its error, as
        ``"Kind: what"``), from a pool thread."""
        future = self._supervisor.ask(message, block=False)  # a dead actor: the future's error
        self._pool.submit(self._answer, key, future, reply)

    def _answer(self, key: int, future: pykka.Future[Any], reply: Callable[[Answer], None]) -> None:
        try:
            answer = Answer(key, value=future.get(timeout=self.timeout_s))
        except Exception as exc:
            answer = Answer(key, error=f"{type(exc).__name__}: {exc}")
        reply(answer)
