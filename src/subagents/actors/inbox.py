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
import random
from typing import TYPE_CHECKING, Any

import pykka
from pykka import messages as pykka_messages

from subagents.actors.latch_future import LatchFuture
from subagents.actors.lazy_event import LazyEvent

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


def actor_urn() -> str:
    """A version-4 UUID URN as pykka's ``uuid.uuid4().urn``, from the ``random`` module: no
    ``os.urandom`` call and no ``UUID`` object per actor. Unique within a process is what
    pykka's registry asks of it."""
    h = f"{random.getrandbits(128) & _UUID4_MASK | _UUID4_BITS:032x}"
    return f"urn:uuid:{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


_UUID4_MASK = ~((0xF000 << 64) | (0xC000 << 48)) & ((1 << 128) - 1)
_UUID4_BITS = (0x4000 << 64) | (0x8000 << 48)


class FastInboxActor(pykka.ThreadingActor):
    """A ThreadingActor with a C ``SimpleQueue`` inbox, made with less than pykka makes."""

    def __init__(self, *_args: Any, **_kwargs: Any) -> None:
        """The fields ``pykka.Actor.__init__`` sets (its urn, inbox, stopped flag and ref),
        set here instead: ``actor_stopped`` a ``LazyEvent`` (no condition unless somebody
        waits on it: nothing does), the urn without a syscall. A live waiting run held
        ~1 KB and six GC-tracked objects more for the two (tests/actors check the fields
        stay those pykka sets)."""
        self.actor_urn = actor_urn()
        self.actor_inbox = self._create_actor_inbox()
        self.actor_stopped = LazyEvent()
        self._actor_ref = pykka.ActorRef(self)

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

    @staticmethod
    def _create_future() -> pykka.Future[Any]:
        """An ask's future: one lock, not a condition (``actors/latch_future.py``)."""
        return LatchFuture()
