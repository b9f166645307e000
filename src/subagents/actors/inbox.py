"""FastInboxActor: a pykka ThreadingActor whose inbox is a ``queue.SimpleQueue``.

pykka's ThreadingActor takes a ``queue.Queue`` for its inbox: a pure-Python queue with a lock
and three conditions, several lock operations per message on each side. pykka asks no more of
an inbox than ``put``, a blocking ``get`` and ``empty`` (its ``ActorInbox`` protocol, the hook
for new actor types), which the C ``SimpleQueue`` has, for far less per message
(benchmarks/README.md). Every actor of the runtime uses it; nothing else changes: one inbox
per actor, messages handled one at a time, in the order they were put.
"""

from __future__ import annotations

import itertools
import os
import queue
import random
from typing import TYPE_CHECKING, Any

import pykka
from pykka import messages as pykka_messages

from subagents.actors.latch_future import LatchFuture
from subagents.actors.lazy_event import LazyEvent
from subagents.actors.threads import InterpreterExiting, NoThread, ThreadPool

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
    """A URN shaped as pykka's ``uuid.uuid4().urn`` (a version-4 UUID's): its first 80 bits
    random but for the version and variant, drawn once per process (again in a forked
    child), its last 48 a count of the actors made. Unique within a process (by the count)
    is what pykka's registry asks of it; a UUID drawn per actor cost a 128-bit draw and five
    slices (~1.5 us, of ~11 us an agent actor's start and end cost altogether)."""
    return f"{_urn_prefix}{next(_urn_count):012x}"


def _draw_urn_prefix() -> None:
    global _urn_prefix
    h = f"{random.getrandbits(76):019x}"
    variant = "89ab"[int(h[15], 16) & 3]
    _urn_prefix = f"urn:uuid:{h[:8]}-{h[8:12]}-4{h[12:15]}-{variant}{h[16:19]}-"


_urn_prefix = ""
_urn_count = itertools.count()
_draw_urn_prefix()
os.register_at_fork(after_in_child=_draw_urn_prefix)


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

    def _loop_on(self, pool: ThreadPool) -> None:
        """Its loop on a thread of ``pool`` (a run's agent with ``agent_threads="own"``).
        None to be had (``NoThread``: the process's thread limit; ``InterpreterExiting``: none
        ever again): the actor, which never ran, is taken out of pykka's registry (``start``
        put it there) and stopped, what was asked of it meanwhile answered as pykka's
        teardown answers it (another thread may ask once it is registered: ``stop_all``'s
        stop; left in an inbox nobody reads, its asker waited for ever), and the refusal
        raised into its starter (``Effector._start`` fails its run)."""
        try:
            pool.run(self._actor_loop)
        except (NoThread, InterpreterExiting):
            pykka.ActorRegistry.unregister(self.actor_ref)
            self.actor_stopped.set()
            self._actor_loop_teardown()
            raise

    @staticmethod
    def _create_actor_inbox() -> ActorInbox:
        inbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
        return inbox

    @staticmethod
    def _create_future() -> pykka.Future[Any]:
        """An ask's future: one lock, not a condition (``actors/latch_future.py``)."""
        return LatchFuture()
