"""Handoff: work handed to one parked thread through a queue of its own, or left in line.

Why not one queue that every idle thread waits on (the ``Dispatcher``'s first design): a
``SimpleQueue`` with several threads blocked in its ``get`` costs about twice as much per
hand-off as one with a single waiter. Its one lock is handed from waiter to waiter and each
wake-up contends for the GIL with the others (measured here: a put and its answer, 13 us with
one waiting thread, 23-25 us with 2, 4 or 8; three more futex wake-ups per hand-off under
strace). A trivial run takes one hand-off to a dispatcher thread, so it paid that on every
spawn. Here each thread parks on its own ``SimpleQueue`` (its ``Seat``), and the one handing
work pops a parked seat (the one parked last: its thread is the most likely still in the
CPU's caches) and puts the work there: one waiter, one wake-up, as a raw pykka actor's thread
(and ``benchmarks/spawn.py``'s floor) has.

Work given by one of the threads themselves (an actor's handling mailing another: a ping-pong)
is not handed to a parked one: it goes in line, where the giving thread takes it itself as its
turn ends, without a thread switch (as a thread of one shared queue took what it had just put
there: a ping-pong then ran on one thread). A parked thread is nudged to take it only if the
giver's turn goes on: the nudge is owed (``nudge_owed``), paid at the giver's next step that may
wait (``pay_nudge``: its next message, a store write, an ask, ``about_to_block``; the
dispatcher and the agent call it there), dropped when its turn ends and it takes the work
itself (``take``; a second item left in line then nudges one). A nudge paid at once, as
before, woke a thread per mail of a durable ping-pong that found the line empty, with its
context switches and a GIL hand-over (measured: ~4 context switches of ~9 per durable mail).
A turn that goes on without such a step (long pure-Python work) holds the work until the
dispatcher's watch thread counts it stalled and starts another thread (``stall_s``). A thread
already counted as blocked (``Seat.replaced``: it said so, or it stalled) leaves nothing in
line for itself: the watch thread would not look at it again, and its turn may last as long
as the user's code waits (a sync function agent's ``ctx.send`` then ``time.sleep``).

No work is lost between a thread deciding to park and parking: a thread parks, then looks at
the line again (and takes itself back out if something came); the giver puts work in the
line, then looks for a parked seat again (and nudges it). Whichever of the two came second
sees the other's step. Every step on the shared list and deque is one C call under the GIL
(append, pop, remove of an object compared by identity), so no lock is taken on the path.
"""

from __future__ import annotations

import collections
import queue
import threading
import time
from typing import Any, Generic, TypeVar

T = TypeVar("T")

_NUDGE = object()
"""Put in a parked seat: "look at the line again" (work came while no seat was parked)."""


class Taker:
    """A thread that takes turns at one handoff (``Handoff.taking``): which, its seat, and
    whether it owes a nudge for work it left in line (``give``)."""

    __slots__ = ("handoff", "owed", "seat")

    def __init__(self, handoff: Handoff[Any], seat: Seat | None) -> None:
        self.handoff = handoff
        self.seat = seat
        """The taker's seat, when it said (``taking``): one counted as blocked gives at once."""
        self.owed = False


class _Here(threading.local):
    taker: Taker | None = None
    """The current thread's, while it takes turns (``Handoff.taking``). One thread-local
    read per give, take or ``pay_nudge`` (each ~750 instructions under callgrind; a give
    read three, a take one and wrote one, in two thread-locals)."""


here = _Here()


def pay_nudge() -> None:
    """The current thread's turn goes on to a step that may wait: the nudge it owes for work
    it left in line (``Handoff.give`` from a taker) is paid now, so a parked thread takes that
    work meanwhile. Nothing owed: nothing (one thread-local read)."""
    taker = here.taker
    if taker is not None and taker.owed:
        taker.owed = False
        if taker.handoff._line:
            taker.handoff._nudge()


class Seat:
    """One thread's place to park: its own queue, and since when it has been busy."""

    __slots__ = ("busy_since", "replaced", "slot")

    def __init__(self) -> None:
        self.slot: queue.SimpleQueue[object] = queue.SimpleQueue()
        self.busy_since = 0.0
        self.replaced = False
        """Its thread is counted as blocked (it said so, or it stalled) and another was
        started in its place: its turn may go on for as long as the user's code waits, so
        what it gives is handed to a parked thread at once, never left in line for it."""
        """When it was handed its current work (monotonic); 0.0 while it waits for work. Set
        before the work leaves where it waited: by the giver before it is put in the seat's
        queue, by ``take`` before it is taken from the line. So work is always in line or
        held by a busy seat, and a thread that has it and is not running it yet never looks
        idle (``Dispatcher.wait_idle``)."""


class Handoff(Generic[T]):
    """Work handed to the seat parked last, or left in line for the next thread free."""

    def __init__(self) -> None:
        self._parked: list[Seat] = []  # a stack: the seat parked last is woken first
        self._line: collections.deque[T] = collections.deque()
        self._closed = False

    def give(self, item: T) -> bool:
        """Hand ``item`` to a parked thread; else leave it in line (False: no thread was
        waiting, the caller may want to start one)."""
        parked, taker = self._parked, here.taker
        if (
            taker is not None
            and taker.handoff is self
            and (taker.seat is None or not taker.seat.replaced)
        ):
            # one of the takers, not counted as blocked: it takes it itself after its turn
            self._line.append(item)
            # unless its turn goes on to a step that may wait first: then a parked one is
            # nudged (``pay_nudge``); False when none is parked, so that a replacement owed
            # is started (``submit``)
            if not parked:
                return False
            taker.owed = True
            return True
        try:
            seat = parked.pop()
        except IndexError:
            self._line.append(item)
            if parked:  # a thread parked after the pop and may have missed the line: nudged
                self._nudge()
            return False
        seat.busy_since = time.monotonic()
        seat.slot.put(item)
        return True

    def _nudge(self) -> bool:
        """Wake the seat parked last to look at the line; whether there was one."""
        try:
            seat = self._parked.pop()
        except IndexError:  # it found the line itself
            return False
        seat.slot.put(_NUDGE)
        return True

    def taking(self, yes: bool, seat: Seat | None = None) -> None:
        """The current thread takes turns here (True), or no longer does (False: what it
        owes a nudge for is handed on, ``pay_nudge``); ``seat``: its own, whose
        ``replaced`` says whether its turn may go on for long (``give``)."""
        if yes:
            here.taker = Taker(self, seat)
            return
        taker = here.taker
        if taker is not None and taker.handoff is self:
            pay_nudge()
            here.taker = None

    def take(self, seat: Seat, linger_s: float | None = None) -> T | None:
        """The next work for ``seat``'s thread: from the line, else waiting parked until some
        is handed to it. None once closed and the line is empty: the thread leaves; or,
        given ``linger_s``, once it waited parked that long and no work came (``closed``
        tells the two apart)."""
        line, parked, clock = self._line, self._parked, time.monotonic
        taker = here.taker
        owed = taker is not None and taker.handoff is self and taker.owed
        if owed:  # its turn ended: it takes what it left in line itself
            taker.owed = False  # type: ignore[union-attr]  # (``owed``: not None)
        while True:
            if line:  # busy before the work leaves the line: never idle in between
                seat.busy_since = clock()
                try:
                    work = line.popleft()
                except IndexError:  # another thread took it first
                    seat.busy_since = 0.0
                else:
                    if owed and line:  # more than it can take: a parked one takes the rest
                        self._nudge()
                    return work
            if self._closed:
                return None
            seat.busy_since = 0.0
            parked.append(seat)
            if line or self._closed:  # came while it parked: taken back out, unless handed
                try:
                    parked.remove(seat)
                except ValueError:  # a giver popped it: what it put is in its queue
                    pass
                else:
                    continue
            if linger_s is None:
                item = seat.slot.get()
            else:
                try:
                    item = seat.slot.get(timeout=linger_s)
                except queue.Empty:
                    try:
                        parked.remove(seat)
                    except ValueError:  # a giver popped it just now: what it put is coming
                        item = seat.slot.get()
                    else:
                        return None
            if item is not _NUDGE:
                return item  # type: ignore[return-value]

    @property
    def closed(self) -> bool:
        """Whether it was closed (``take`` gives None then, and the threads leave)."""
        return self._closed

    @property
    def waiting(self) -> bool:
        """Whether a thread is parked, waiting for work."""
        return bool(self._parked)

    @property
    def in_line(self) -> bool:
        """Whether work waits for a thread."""
        return bool(self._line)

    def close(self) -> None:
        """Take no more turns: every parked thread is woken, and each thread leaves once the
        line is empty (the work in it is done first)."""
        self._closed = True
        while True:
            try:
                seat = self._parked.pop()
            except IndexError:
                return
            seat.slot.put(_NUDGE)
