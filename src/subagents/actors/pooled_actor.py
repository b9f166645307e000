"""PooledActor: a pykka actor whose messages are handled on a ``Dispatcher``'s threads
(``actors/pooled.py``: why an actor holds no thread of its own, and how the dispatcher's
threads take turns).

Apart from the dispatcher for its concept: the actor's side of the arrangement (its
mailbox bound to a dispatcher at its start, pykka's loop run one drain at a time, its stop
counted), where ``pooled.py`` holds the threads' side (who takes work, who is replaced
when a handling blocks).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, ClassVar

import pykka
from pykka._envelope import Envelope

from subagents.actors.handoff import pay_nudge
from subagents.actors.inbox import PYKKA_MESSAGES
from subagents.actors.latch_future import LatchFuture
from subagents.actors.mailbox import Mailbox
from subagents.actors.pooled import THROUGHPUT, Dispatcher
from subagents.actors.threads import InterpreterExiting, NoThread
from subagents.actors.turn_failures import handling_failed
from subagents.logs import get_logger

if TYPE_CHECKING:
    from typing import Self

    from pykka._actor import ActorInbox

log = get_logger("subagents.dispatch")


class PooledActor(pykka.Actor):
    """A pykka actor whose messages are handled on a ``Dispatcher``'s threads.

    Start it as any pykka actor, with a ``dispatcher=`` keyword (taken by ``start``, not passed
    to ``__init__``): ``MyActor.start(..., dispatcher=d)``."""

    throughput: ClassVar[int] = THROUGHPUT

    actor_inbox: Mailbox

    _dispatcher: Dispatcher

    # Class defaults, not set by an ``__init__`` of its own: one that forwarded
    # ``*args, **kwargs`` re-packed every start's keywords (an agent actor takes 14).
    _loop_started: bool = False
    _counted: bool = False

    @classmethod
    def start(cls, *args: Any, **kwargs: Any) -> pykka.ActorRef[Self]:
        """As ``pykka.Actor.start``, on ``dispatcher`` (a keyword it takes), without the
        ``ActorRegistry`` (see the module doc)."""
        dispatcher = kwargs.pop("dispatcher", None)
        if not isinstance(dispatcher, Dispatcher):
            raise TypeError(f"{cls.__name__}.start needs dispatcher=<a Dispatcher>")
        obj = cls(*args, **kwargs)
        obj._dispatcher = dispatcher  # (each key set before the class's next instance is made:
        obj._loop_started = False  # CPython's shared keys, see ``AgentActor.__init__``)
        obj.actor_inbox.bind(obj, dispatcher)
        obj._counted = True
        dispatcher._actor_started()
        obj._start_actor_loop()
        return obj.actor_ref

    # ---- pykka's extension points ------------------------------------------------------------

    @staticmethod
    def _create_actor_inbox() -> ActorInbox:
        return Mailbox()

    @staticmethod
    def _create_future() -> pykka.Future[Any]:
        return LatchFuture()

    def _start_actor_loop(self) -> None:
        """No thread: the actor is put in line once, for ``on_start`` (and the messages sent
        meanwhile); after that, whenever a message finds its mailbox idle."""
        if self.actor_inbox.schedule():
            try:
                self._dispatcher.submit(self)
            except (NoThread, InterpreterExiting) as refused:  # (not raised into the starter:
                if type(refused) is NoThread:  # (exiting: logging can import nothing now)
                    log.error("no thread to start an actor on", actor=str(self), exc_info=True)
                self.actor_inbox.hand_back(refused)  # tries again; a put then hears why)

    # ---- the loop, one drain at a time -------------------------------------------------------

    def _handle_receive(self, message: Any) -> Any:
        """As ``FastInboxActor._handle_receive``: pykka's messages told apart by one lookup."""
        if type(message) in PYKKA_MESSAGES:
            return super()._handle_receive(message)
        return self.on_receive(message)

    def _stop(self) -> None:
        """pykka's ``Actor._stop`` without its ``ActorRegistry.unregister``: a pooled actor is
        never registered (see the module doc), and the unregister searched the registry's
        list under its lock, and it and ``_stop`` formatted a debug line each (logged or not) on
        every stop."""
        if self._counted:  # (``_uncount``, its two frames inlined: every run's stop)
            self._counted = False
            self._dispatcher._stops.add()
        self.actor_stopped.set()
        try:
            self.on_stop()
        except BaseException:  # (pykka: ``Exception``; a BaseException escaped the turn)
            self._handle_failure(*sys.exc_info())

    def _handle_failure(self, *exc_info: Any) -> None:
        self._uncount()
        super()._handle_failure(*exc_info)

    def _uncount(self) -> None:
        if self._counted:
            self._counted = False
            self._dispatcher._actor_stopped()

    def _drain(self) -> None:
        """Hand up to ``throughput`` messages to pykka's handling; then unschedule (the mailbox
        is empty) or go to the back of the line, on one dispatcher thread at a time. A bare
        message (``Mailbox.tell``, a mail delivered straight) goes to ``on_receive`` here."""
        inbox = self.actor_inbox
        line = inbox.line
        went_on = False  # (a drain starts owing no nudge: ``Handoff.take`` paid it)
        if not self._loop_started:
            self._loop_started = went_on = True
            try:  # (pykka's ``_actor_loop_setup``, without its frame; a BaseException too:
                self.on_start()  # it stops this actor as an Exception does, the turn goes on)
            except BaseException:
                self._handle_failure(*sys.exc_info())
        stopped: Any = self.actor_stopped  # (a LazyEvent or threading.Event: its ``_flag`` read)
        for _ in range(self.throughput):
            if stopped._flag:  # (no frame) closed if nothing came (most stops: no teardown)
                if inbox.close_if_empty(self):
                    return
                self._actor_loop_teardown()  # asks still in the mailbox: ActorDeadError
                continue
            if not line:  # (looked at, not popped: an empty pop raised)
                if inbox.unschedule_if_empty():
                    return
                continue
            item = line.popleft()  # (only this thread takes: it holds the actor's turn)
            if went_on:  # the turn goes on: what the last handling left in line is taken
                pay_nudge()  # by a parked thread meanwhile (handoff.py)
            went_on = True
            if type(item) is Envelope or type(item) in PYKKA_MESSAGES:
                self._handle_envelope(item if type(item) is Envelope else Envelope(item))
                continue
            try:
                self.on_receive(item)
            except BaseException:
                handling_failed(self, None)
        self._dispatcher.submit(self)

    def _handle_envelope(self, envelope: Envelope[Any]) -> None:
        """pykka's loop body (``Actor._actor_loop_running``) for one message."""
        try:
            response = self._handle_receive(envelope.message)
            if envelope.reply_to is not None:
                envelope.reply_to.set(response)
        except BaseException:  # (``turn_failures.py``: a BaseException stops this actor)
            if envelope.reply_to is not None and isinstance(sys.exc_info()[1], Exception):
                envelope.reply_to.set_exception()
            else:
                handling_failed(self, envelope.reply_to)
