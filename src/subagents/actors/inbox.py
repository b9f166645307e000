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

if TYPE_CHECKING:
    from pykka._actor import ActorInbox


class FastInboxActor(pykka.ThreadingActor):
    """A ThreadingActor with a C ``SimpleQueue`` inbox."""

    @staticmethod
    def _create_actor_inbox() -> ActorInbox:
        inbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
        return inbox
