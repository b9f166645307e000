"""FastInboxActor: a pykka ThreadingActor whose inbox is a ``queue.SimpleQueue``.

pykka's ThreadingActor takes a ``queue.Queue`` for its inbox: a pure-Python queue with a lock
and three conditions, several lock operations per message on each side. pykka asks no more of
an inbox than ``put``, a blocking ``get`` and ``empty`` (its ``ActorInbox`` protocol, the hook
for new actor types), which the C ``SimpleQueue`` has, for far less per message
(benchmarks/README.md). Every actor of the runtime uses it; nothing else changes: one inbox
per actor, messages handled one at a time, in the order they were put.
"""

from __future__ import annotations

import queue
from typing import TYPE_CHECKING, Any

import pykka
from pykka import messages as pykka_messages

if TYPE_CHECKING:
    from pykka._actor import ActorInbox


PYKKA_MESSAGES = frozenset(
    {
        pykka_messages._ActorStop,
        pykka_messages.ProxyCall,
        pykka_messages.ProxyGetAttr,
        pykka_messages.ProxySetAttr,
    }
)
"""pykka's own messages (stop, proxy calls): what ``Actor._handle_receive`` tells apart, one
``isinstance`` each, before a message reaches ``on_receive``."""


def stop_message() -> Any:
    """pykka's stop message: told to an actor, it stops after the messages before it. What
    ``Actor.stop()`` tells, without the two futures of ``ActorRef.stop(block=False)``."""
    return pykka_messages._ActorStop()


class FastInboxActor(pykka.ThreadingActor):
    """A ThreadingActor with a C ``SimpleQueue`` inbox."""

    def _handle_receive(self, message: Any) -> Any:
        """One set lookup instead of pykka's four ``isinstance`` calls per message: the
        runtime's messages (most of them) go straight to ``on_receive``."""
        if type(message) in PYKKA_MESSAGES:
            return super()._handle_receive(message)
        return self.on_receive(message)

    @staticmethod
    def _create_actor_inbox() -> ActorInbox:
        inbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
        return inbox
