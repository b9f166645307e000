"""Mailbox: a pooled actor's inbox (``actors/pooled.py``), a deque that has its actor run by
its dispatcher when a message finds it idle.

Apart from ``pooled.py`` because it is a concept of its own: what is put, in what order, and
when the actor is handed to a thread (the put that finds it idle) or forgotten (its stop);
the dispatcher only sees ``submit``.
"""

from __future__ import annotations

import collections
import threading
from typing import Any, Protocol

import pykka
from pykka import messages as pykka_messages
from pykka._envelope import Envelope


class Submits(Protocol):
    """What runs an actor whose mailbox has messages (``pooled.Dispatcher``)."""

    def submit(self, actor: Any) -> None: ...


class Mailbox:
    """A pooled actor's inbox: a deque that has its actor run when a message arrives.

    ``put`` appends, then, if the actor is not scheduled yet, schedules it (under the
    mailbox's lock, against the drain that finds the deque empty and unschedules: a message is
    never left in an unscheduled mailbox). ``get`` never blocks: pykka's teardown calls it only
    after ``empty()`` said no.

    Once its actor has stopped and the drain that tore it down found it empty, the mailbox
    forgets the actor (``close_if_empty``): the actor and the mailbox held each other, so
    every ended run's objects were left for the cyclic GC to find; now they are freed as the
    last reference goes. A message put after that (a put that raced the stop past
    ``ActorRef``'s ``is_alive`` check) is refused at once, as pykka's teardown would."""

    __slots__ = ("_actor", "_dispatcher", "_gone", "_lock", "_scheduled", "line")

    def __init__(self) -> None:
        self.line: collections.deque[Any] = collections.deque()
        """Envelopes (pykka's tells and asks) and bare messages (``tell``), in the order put;
        taken only by the thread its actor was handed to (``PooledActor._drain``)."""
        self._lock = threading.Lock()
        self._scheduled = False
        self._actor: Any = None  # a ``PooledActor``
        self._dispatcher: Submits | None = None
        self._gone: tuple[str, str] | None = None
        """Once closed: the stopped actor's type and urn, to name it in the refusals (not
        the actor: its objects are freed; not formatted until a refusal needs it)."""

    def bind(self, actor: Any, dispatcher: Submits) -> None:
        """(The dispatcher, not its bound ``submit``: one object less per live actor for
        the cyclic GC to walk.)"""
        self._actor = actor
        self._dispatcher = dispatcher

    def put(self, item: Any, /) -> None:
        """``item`` in the mailbox: pykka's ``Envelope`` (``ActorRef.tell``, ``ask``), or a
        bare message (``tell``)."""
        self.line.append(item)
        with self._lock:
            if self._scheduled:
                return
            actor = self._actor
            if actor is not None:
                self._scheduled = True
        if actor is not None:
            assert self._dispatcher is not None
            self._dispatcher.submit(actor)
        elif self._gone is not None:  # closed: nobody drains it any more
            self._refuse_all(self._gone)

    tell = put
    """A runtime's tell that nothing answers, put as it is, without pykka's ``Envelope``:
    ``ActorRef.tell`` made one (a Python ``__init__``) and asked ``is_alive`` first, for
    every mail delivered straight (``mail_desk.Sent.deliver``). The drain tells the two
    apart (``PooledActor._drain``). One put after the actor stopped is dropped either way,
    as pykka's teardown drops a tell."""

    def get(self) -> Envelope[Any]:
        """The next message as pykka's teardown takes it: in an ``Envelope`` (a bare tell's
        made now)."""
        item = self.line.popleft()
        return item if type(item) is Envelope else Envelope(item)

    def empty(self) -> bool:
        return not self.line

    def __len__(self) -> int:
        return len(self.line)

    def schedule(self) -> bool:
        """Schedule the actor (its start); False if it already is."""
        with self._lock:
            if self._scheduled:
                return False
            self._scheduled = True
        return True

    def unschedule_if_empty(self) -> bool:
        """The drain found no message: unschedule, unless one arrived just now."""
        with self._lock:
            if self.line:
                return False
            self._scheduled = False
            return True

    def close_if_empty(self, actor: Any) -> bool:
        """The actor has stopped: unschedule for good and forget ``actor``, unless a message
        is in the mailbox (then False: its teardown refuses it, and this is asked again)."""
        with self._lock:
            if self.line:
                return False
            self._scheduled = False
            self._gone = (type(actor).__name__, actor.actor_urn)
            self._actor = None
            return True

    def _refuse_all(self, gone: tuple[str, str]) -> None:
        """pykka's teardown, for what was put after the close: an ask is refused
        ``ActorDeadError`` (a stop's ask is answered: its actor has stopped); a tell is
        dropped."""
        while self.line:
            try:
                envelope = self.line.popleft()
            except IndexError:  # another putter refused it meanwhile
                return
            if type(envelope) is not Envelope:  # a bare tell (``tell``)
                continue
            reply = envelope.reply_to
            if reply is None:
                continue
            if type(envelope.message) is pykka_messages._ActorStop:
                reply.set(None)
            else:
                dead = pykka.ActorDeadError(
                    f"{gone[0]} ({gone[1]}) stopped before handling the message"
                )
                reply.set_exception(exc_info=(pykka.ActorDeadError, dead, None))
