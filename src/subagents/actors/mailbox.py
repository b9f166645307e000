"""Mailbox: a pooled actor's inbox (``actors/pooled.py``), a deque that has its actor run by
its dispatcher when a message finds it idle.

Apart from ``pooled.py`` because it is a concept of its own: what is put, in what order, and
when the actor is handed to a thread (the put that finds it idle) or forgotten (its stop);
the dispatcher only sees ``submit``.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from typing import Any, Protocol

import pykka
from pykka import messages as pykka_messages
from pykka._envelope import Envelope

from subagents.actors.threads import InterpreterExiting, NoThread

_NOTHING = object()
"""``hand_back``'s item when no put made it (an actor's start): nothing taken back out."""


def _is_ask(item: Any) -> bool:
    return type(item) is Envelope and item.reply_to is not None


class Submits(Protocol):
    """What runs an actor whose mailbox has messages (``pooled.Dispatcher``)."""

    def submit(self, actor: Any) -> None: ...


class Mailbox:
    """A pooled actor's inbox: a deque that has its actor run when a message arrives.

    Its actor's *turn* is a lock, held from the put that found the actor idle (or its start)
    until the drain that finds the deque empty: ``put`` appends, then takes the turn if it
    is free (``acquire(False)``, one C call: whoever gets it hands the actor to its
    dispatcher); the drain that finds the deque empty lets the turn go, then looks at the
    deque again and takes the turn back if a message came meanwhile (``unschedule_if_empty``).
    Each step is one C call under the GIL, and whichever of a put and that drain's end comes
    second sees the other's: a message is never left in a mailbox whose turn nobody holds
    (but a tell, when no thread could be had at all: ``hand_back``), and only one thread
    ever holds it (``with`` a lock and a flag, twice per message, cost
    ~5,000 instructions; this ~1,800, measured with callgrind). The turn is held from the
    mailbox's making until its actor starts (``schedule``): a message put before that waits
    for the start. ``get`` never blocks: pykka's teardown calls it only after ``empty()``
    said no.

    Once its actor has stopped and the drain that tore it down found it empty, the mailbox
    forgets the actor (``close_if_empty``): the actor and the mailbox held each other, so
    every ended run's objects were left for the cyclic GC to find; now they are freed as the
    last reference goes. A message put after that (a put that raced the stop past
    ``ActorRef``'s ``is_alive`` check) is refused at once, as pykka's teardown would."""

    __slots__ = ("_actor", "_dispatcher", "_gone", "_started", "_turn", "line")

    def __init__(self) -> None:
        self.line: collections.deque[Any] = collections.deque()
        """Envelopes (pykka's tells and asks) and bare messages (``tell``), in the order put;
        taken only by the thread its actor was handed to (``PooledActor._drain``)."""
        self._turn = threading.Lock()
        self._turn.acquire()  # (held until its actor starts: ``schedule``)
        self._started = False
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
        if self._turn.acquire(False):  # it was idle: this put hands it on
            actor = self._actor
            if actor is not None:
                try:
                    self._dispatcher.submit(actor)  # type: ignore[union-attr]
                except (NoThread, InterpreterExiting) as refused:  # (before it was handed on)
                    self.hand_back(refused, item)
                    raise
            else:  # closed (never started: the turn is held): nobody drains it any more
                self._refuse_closed()

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
        """Its actor starts: the turn held since the mailbox was made is the start's, which
        hands the actor on (True; False when asked again)."""
        if self._started:
            return False
        self._started = True
        return True

    def hand_back(self, refused: NoThread | InterpreterExiting, item: Any = _NOTHING) -> None:
        """Its dispatcher could not take the actor (``refused``: no thread at all, or none
        ever again: the interpreter is exiting): ``item``
        (what the put that raised had put; its putter hears the error) taken back out, and
        the turn let go, so that the next put hands the actor on again. An ask another
        thread put meanwhile (its put found the turn held, so it handed nothing on) is
        refused ``refused`` too: its asker would wait for ever if no put came after it. A
        tell put meanwhile stays, in its place, for that next put (nobody waits on it).
        Whatever comes while the turn is held here is handed on again once it is let go."""
        line = self.line
        self._take_out(lambda queued: queued is item)
        while True:
            for ask in self._take_out(_is_ask, every=True):
                ask.reply_to.set_exception(exc_info=(type(refused), refused, None))
            seen = len(line)
            self._turn.release()
            if not (len(line) > seen and self._turn.acquire(False)):  # nothing came meanwhile
                return
            try:  # a put came while the turn was held here: handed on for it
                self._dispatcher.submit(self._actor)  # type: ignore[union-attr]
                return
            except (NoThread, InterpreterExiting) as again:
                refused = again

    def _take_out(self, chosen: Callable[[Any], bool], every: bool = False) -> list[Any]:
        """The first (``every``: each) message ``chosen`` in the mailbox, taken out (the
        turn held: nobody else takes; by index, never iterating the deque, as puts append
        meanwhile; chosen by identity or type, never ``==``, which user messages define)."""
        taken, at = [], 0
        while at < len(self.line):
            if chosen(self.line[at]):
                taken.append(self.line[at])
                del self.line[at]
                if not every:
                    break
            else:
                at += 1
        return taken

    def unschedule_if_empty(self) -> bool:
        """The drain found no message: the turn let go (True), unless a message came just
        now and the turn was taken back (False: the drain goes on)."""
        self._turn.release()
        return not (self.line and self._turn.acquire(False))

    def close_if_empty(self, actor: Any) -> bool:
        """The actor has stopped: the turn let go for good and ``actor`` forgotten, unless a
        message is in the mailbox (then False: its teardown refuses it, and this is asked
        again). A put that came meanwhile is refused here, or by its putter."""
        if self.line:
            return False
        self._gone = (type(actor).__name__, actor.actor_urn)
        self._actor = None
        self._turn.release()
        if self.line and self._turn.acquire(False):
            self._refuse_closed()
        return True

    def close_unstarted(self, actor: Any) -> None:
        """``actor``'s start found no thread and it is given up (a run's agent:
        ``PooledAgentActor``): closed as a stopped actor's, the turn its start held (never
        handed on) let go for good; what another thread put meanwhile is refused as after a
        stop, and so is every later put (none hands the actor on and runs it)."""
        self._gone = (type(actor).__name__, actor.actor_urn)
        self._actor = None
        self._refuse_closed()

    def _refuse_closed(self) -> None:
        """The turn of a closed mailbox, taken by a put: what is in it refused, the turn let
        go, and again if more came before it was (its putter could not take the turn)."""
        while True:
            self._refuse_all()
            self._turn.release()
            if not (self.line and self._turn.acquire(False)):
                return

    def _refuse_all(self) -> None:
        """pykka's teardown, for what was put after the close (the turn held: nobody else
        takes): an ask is refused ``ActorDeadError`` (a stop's ask is answered: its actor
        has stopped); a tell is dropped."""
        gone = self._gone
        assert gone is not None
        while self.line:
            envelope = self.line.popleft()
            if type(envelope) is not Envelope or envelope.reply_to is None:  # a tell
                continue
            if type(envelope.message) is pykka_messages._ActorStop:
                envelope.reply_to.set(None)
            else:
                dead = pykka.ActorDeadError(
                    f"{gone[0]} ({gone[1]}) stopped before handling the message"
                )
                envelope.reply_to.set_exception(exc_info=(pykka.ActorDeadError, dead, None))
