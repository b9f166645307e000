"""Handoff: work handed to one parked thread through a queue of its own (actors/handoff.py).

Real threads; the GIL's switch interval is made tiny so that threads interleave between almost
any two bytecodes, where a lost wake-up would show (a giver and a thread about to park racing).
Every wait has a timeout: lost work fails the test instead of hanging it.
"""

from __future__ import annotations

import collections
import inspect
import queue
import threading
from typing import Any

import pytest

from subagents.actors.handoff import Handoff, Seat, pay_nudge
from subagents.actors.pooled import Dispatcher
from subagents.actors.pooled_actor import PooledActor
from subagents.blocking import about_to_block

WAIT = 30.0


def _takers(handoff: Handoff[int], n: int, done: queue.SimpleQueue[int]) -> list[threading.Thread]:
    def take() -> None:
        seat = Seat()
        while (item := handoff.take(seat)) is not None:
            done.put(item)

    threads = [threading.Thread(target=take, daemon=True) for _ in range(n)]
    for t in threads:
        t.start()
    return threads


@pytest.mark.usefixtures("tiny_switch_interval")
@pytest.mark.parametrize("takers", [1, 3])
def test_every_item_given_one_at_a_time_is_taken_once_none_lost(takers: int) -> None:
    """Each item is given when the takers are finishing the last one and about to park: the
    race of a giver finding no seat parked and a thread parking just then. An item left in
    line with every thread parked never comes back (the get times out)."""
    handoff: Handoff[int] = Handoff()
    done: queue.SimpleQueue[int] = queue.SimpleQueue()
    threads = _takers(handoff, takers, done)
    for i in range(5000):
        handoff.give(i)
        assert done.get(timeout=WAIT) == i
    handoff.close()
    for t in threads:
        t.join(WAIT)
        assert not t.is_alive()
    assert done.empty()


@pytest.mark.usefixtures("tiny_switch_interval")
def test_items_given_from_many_threads_at_once_are_each_taken_exactly_once() -> None:
    handoff: Handoff[int] = Handoff()
    done: queue.SimpleQueue[int] = queue.SimpleQueue()
    threads = _takers(handoff, 3, done)
    givers = [
        threading.Thread(target=lambda k=k: [handoff.give(k * 10_000 + i) for i in range(2000)])
        for k in range(4)
    ]
    for g in givers:
        g.start()
    for g in givers:
        g.join(WAIT)
    taken = sorted(done.get(timeout=WAIT) for _ in range(8000))
    assert taken == sorted(k * 10_000 + i for k in range(4) for i in range(2000))
    handoff.close()
    for t in threads:
        t.join(WAIT)
        assert not t.is_alive()
    assert done.empty()


class _SlowToPark(Seat):
    """A seat whose thread stops just before it parks (where it marks itself not busy), until
    let go: the giver runs in that gap."""

    def __init__(self) -> None:
        self.parking = threading.Event()
        self.go = threading.Event()
        self.armed = False
        self._busy = 0.0
        super().__init__()
        self.armed = True

    @property  # type: ignore[override]
    def busy_since(self) -> float:
        return self._busy

    @busy_since.setter
    def busy_since(self, value: float) -> None:
        self._busy = value
        if value == 0.0 and self.armed:
            self.armed = False
            self.parking.set()
            assert self.go.wait(WAIT)


def test_work_given_just_before_a_thread_parks_is_seen_by_it() -> None:
    """The giver finds no seat parked and leaves the work in line; the thread, about to park
    then, looks at the line again once parked and takes it (without that look it would wait
    on its own queue with the work in line)."""
    handoff: Handoff[str] = Handoff()
    seat = _SlowToPark()
    got: queue.SimpleQueue[str | None] = queue.SimpleQueue()
    threading.Thread(target=lambda: got.put(handoff.take(seat)), daemon=True).start()
    assert seat.parking.wait(WAIT)
    assert handoff.give("work") is False  # nobody parked yet: left in line
    seat.go.set()
    assert got.get(timeout=5.0) == "work"


class _PausingLine(collections.deque[Any]):
    """A line whose ``append`` waits, once, until it is let go: the giver stopped between
    finding no seat parked and putting its work in line."""

    def __init__(self) -> None:
        super().__init__()
        self.appending = threading.Event()
        self.go = threading.Event()

    def append(self, item: Any) -> None:
        if not self.appending.is_set():
            self.appending.set()
            assert self.go.wait(WAIT)
        super().append(item)


def test_a_thread_that_parked_while_work_was_being_put_in_line_is_nudged() -> None:
    """The giver found no seat parked; before its work is in line a thread parks (and finds
    the line empty): the giver, seeing a seat parked now, nudges it to look again."""
    handoff: Handoff[str] = Handoff()
    line = handoff._line = _PausingLine()
    giver = threading.Thread(target=handoff.give, args=("work",), daemon=True)
    giver.start()
    assert line.appending.wait(WAIT)
    got: queue.SimpleQueue[str | None] = queue.SimpleQueue()
    threading.Thread(target=lambda: got.put(handoff.take(Seat())), daemon=True).start()
    pause = threading.Event()
    for _ in range(int(WAIT / 0.001)):
        if handoff.waiting:
            break
        pause.wait(0.001)
    assert handoff.waiting
    line.go.set()
    assert got.get(timeout=5.0) == "work"


def test_a_thread_handed_work_is_busy_before_it_wakes() -> None:
    """The giver marks the seat busy before putting the work in its queue: a thread woken and
    not yet running is never counted idle (``Dispatcher.wait_idle``)."""
    handoff: Handoff[str] = Handoff()
    seat = Seat()
    got: queue.SimpleQueue[str | None] = queue.SimpleQueue()
    taker = threading.Thread(target=lambda: got.put(handoff.take(seat)), daemon=True)
    taker.start()
    parked = threading.Event()
    while not handoff.waiting:  # (the thread parks on its own queue: then it waits)
        assert taker.is_alive()
        parked.wait(0.001)
    assert seat.busy_since == 0.0
    assert handoff.give("work") is True
    assert seat.busy_since > 0.0
    assert got.get(timeout=WAIT) == "work"


def test_work_given_while_no_thread_waits_is_left_in_line_and_taken_next() -> None:
    handoff: Handoff[str] = Handoff()
    assert handoff.give("first") is False  # nobody parked
    assert handoff.in_line
    assert handoff.take(Seat()) == "first"
    handoff.close()
    assert handoff.take(Seat()) is None


def test_closing_lets_the_line_be_taken_first_then_every_thread_leaves() -> None:
    handoff: Handoff[int] = Handoff()
    handoff.give(1)
    handoff.give(2)
    handoff.close()
    seat = Seat()
    assert [handoff.take(seat), handoff.take(seat), handoff.take(seat)] == [1, 2, None]


class _Echo(PooledActor):
    def on_receive(self, message: object) -> object:
        return message


def test_each_dispatcher_thread_waits_on_a_queue_of_its_own() -> None:
    """The mechanism, at the dispatcher: its idle threads are parked each on its own seat
    (one waiter per queue), and actors are handed to them one by one."""
    d = Dispatcher(size=3, name="t-handoff")
    try:
        refs = [_Echo.start(dispatcher=d) for _ in range(20)]
        assert [r.ask(i, timeout=WAIT) for i, r in enumerate(refs)] == list(range(20))
        for r in refs:
            r.stop()
        assert d.wait_idle(WAIT)
        pause = threading.Event()
        for _ in range(int(WAIT / 0.001)):  # (each thread parks once its drain is over)
            if len(d._handoff._parked) == 3:
                break
            pause.wait(0.001)
        seats = list(d._handoff._parked)
        assert len(seats) == 3
        assert len({id(s.slot) for s in seats}) == 3
    finally:
        assert d.close(WAIT) == []


class _CountingSlot:
    """A seat's queue that counts what is put in it (a hand-off or a nudge: a wake-up)."""

    def __init__(self) -> None:
        self.inner: queue.SimpleQueue[object] = queue.SimpleQueue()
        self.puts = 0

    def put(self, item: object) -> None:
        self.puts += 1
        self.inner.put(item)

    def get(self) -> object:
        return self.inner.get()


def _parked_taker(handoff: Handoff[str]) -> tuple[_CountingSlot, queue.SimpleQueue[str | None]]:
    """A thread parked in ``handoff.take`` (its seat's queue counted), and what it takes."""
    seat = Seat()
    slot = _CountingSlot()
    seat.slot = slot  # type: ignore[assignment]
    got: queue.SimpleQueue[str | None] = queue.SimpleQueue()
    threading.Thread(target=lambda: got.put(handoff.take(seat)), daemon=True).start()
    pause = threading.Event()
    for _ in range(int(WAIT / 0.001)):
        if handoff.waiting:
            break
        pause.wait(0.001)
    assert handoff.waiting
    return slot, got


@pytest.mark.usefixtures("tiny_switch_interval")
def test_work_a_taker_gives_is_in_line_and_a_parked_thread_takes_it_if_the_giver_goes_on() -> None:
    """Work given from one of the taking threads (a handling mailing another actor) is left in
    line for the giver to take after its turn; if its turn goes on to a step that may wait
    (``pay_nudge``: a store write, an ask, ``about_to_block``, its next message), a parked
    thread is nudged then, and takes it while the giver's turn goes on."""
    handoff: Handoff[str] = Handoff()
    slot, got = _parked_taker(handoff)
    handoff.taking(True)
    try:
        assert handoff.give("work") is True  # a parked thread will take it if need be
        assert slot.puts == 0  # not woken yet
        pay_nudge()  # this thread's turn goes on
        assert got.get(timeout=5.0) == "work"  # the parked one took it
        assert slot.puts == 1
        pay_nudge()  # paid once: nothing more owed
        assert slot.puts == 1
    finally:
        handoff.taking(False)


@pytest.mark.usefixtures("tiny_switch_interval")
def test_work_a_taker_gives_and_takes_as_its_turn_ends_wakes_no_parked_thread() -> None:
    """The ping-pong case: the giver's turn ends right after it mailed, and it takes the work
    itself. No parked thread is woken for it: one nudged at once (as before) found the line
    empty, and cost a thread switch and a GIL hand-over per mail (durable ping-pong: ~10
    context switches per mail, ~3 without)."""
    handoff: Handoff[str] = Handoff()
    slot, got = _parked_taker(handoff)
    handoff.taking(True)
    try:
        assert handoff.give("work") is True
        assert handoff.take(Seat()) == "work"  # its turn ended: taken by itself
        pay_nudge()  # nothing owed any more
        assert slot.puts == 0  # the parked thread was never woken
        assert handoff.waiting
    finally:
        handoff.taking(False)
    handoff.close()
    assert got.get(timeout=5.0) is None


@pytest.mark.usefixtures("tiny_switch_interval")
def test_a_taker_that_left_two_in_line_takes_one_and_a_parked_thread_the_other() -> None:
    handoff: Handoff[str] = Handoff()
    slot, got = _parked_taker(handoff)
    handoff.taking(True)
    try:
        assert handoff.give("first") is True
        assert handoff.give("second") is True
        assert handoff.take(Seat()) == "first"
        assert got.get(timeout=5.0) == "second"  # nudged as the giver took the first
        assert slot.puts == 1
    finally:
        handoff.taking(False)


@pytest.mark.usefixtures("tiny_switch_interval")
def test_a_taker_that_stops_taking_hands_on_what_it_left_in_line() -> None:
    handoff: Handoff[str] = Handoff()
    _, got = _parked_taker(handoff)
    handoff.taking(True)
    assert handoff.give("work") is True
    handoff.taking(False)  # (a dispatcher thread replaced while blocked, leaving)
    assert got.get(timeout=5.0) == "work"


def test_work_a_taker_gives_while_none_is_parked_is_taken_by_it_next() -> None:
    handoff: Handoff[str] = Handoff()
    handoff.taking(True)
    try:
        assert handoff.give("next") is False  # nobody to nudge: the caller may start one
        assert handoff.in_line
        assert handoff.take(Seat()) == "next"
    finally:
        handoff.taking(False)


class _Answers(PooledActor):
    def __init__(self, ran: threading.Event) -> None:
        super().__init__()
        self.ran = ran

    def on_receive(self, message: object) -> None:
        self.ran.set()


class _Mails(PooledActor):
    def __init__(self, to: Any, mailing: threading.Event) -> None:
        super().__init__()
        self.to, self.mailing = to, mailing

    def on_receive(self, message: object) -> None:
        self.mailing.set()
        self.to.tell(message)  # from a dispatcher thread: in line, for this thread to take next


def test_work_a_thread_takes_from_the_line_is_never_counted_idle_before_it_runs() -> None:
    """``wait_idle`` says idle only when no actor is in line and none is being drained. An
    actor taken from the line (here: mailed by a handling on the dispatcher's one thread,
    which takes it as its turn ends) was out of the line before its thread counted as
    busy: in between, ``wait_idle`` said idle while the actor's message was still unhandled
    (a test waiting on ``agents_idle`` then read what was not there yet). The thread is held
    right there, by a trace function on it, and the dispatcher must not look idle."""
    ran, mailing = threading.Event(), threading.Event()
    held, release = threading.Event(), threading.Event()
    lines, first = inspect.getsourcelines(Dispatcher._work)
    after_take = first + next(i for i, s in enumerate(lines) if "if actor is None" in s)

    def local(frame: Any, event: str, _arg: object) -> Any:
        if (
            event == "line"
            and frame.f_lineno == after_take
            and mailing.is_set()
            and isinstance(frame.f_locals.get("actor"), _Answers)
            and not held.is_set()
        ):
            held.set()
            release.wait(WAIT)
        return local

    def trace(frame: Any, event: str, _arg: object) -> Any:
        return local if frame.f_code is Dispatcher._work.__code__ else None

    before = threading.gettrace()
    threading.settrace(trace)  # (the dispatcher's threads start with the first actor)
    try:
        d = Dispatcher(size=1, name="t-handoff-idle")
        answers = _Answers.start(ran, dispatcher=d)
    finally:
        threading.settrace(before)  # type: ignore[arg-type]
    try:
        mails = _Mails.start(answers, mailing, dispatcher=d)
        mails.tell("hello")
        assert held.wait(WAIT)  # the one thread took the answering actor from the line
        assert not ran.is_set()
        assert d.wait_idle(0.2) is False  # its message is not handled yet: not idle
    finally:
        release.set()
    try:
        assert ran.wait(WAIT)
        assert d.wait_idle(WAIT)
        mails.stop()
        answers.stop()
    finally:
        assert d.close(WAIT) == []


class _Sets(PooledActor):
    def on_receive(self, message: threading.Event) -> None:
        message.set()


class _MailsThenWaits(PooledActor):
    """Mails ``to`` (from its dispatcher thread: the work goes in line, for this thread to take
    after its turn) and then waits for the answer, saying it blocks, as a tool call does."""

    def __init__(self, to: Any) -> None:
        super().__init__()
        self.to = to

    def on_receive(self, message: object) -> bool:
        answered = threading.Event()
        self.to.tell(answered)
        about_to_block()
        return answered.wait(WAIT)


@pytest.mark.parametrize("size", [1, 2])
def test_a_turn_that_mails_and_then_blocks_for_the_answer_does_not_hold_the_mail_behind_it(
    size: int,
) -> None:
    """A handling that mails another actor and then waits for its answer: what it mailed is
    in line for its own thread, whose turn does not end until the answer comes. Every thread
    of the dispatcher does so at once; no watch thread looks (``stall_s`` never reached): the
    answers come all the same, each blocked thread replaced as work waits in line."""
    d = Dispatcher(size=size, stall_s=3600.0, name="t-handoff-mail-block")
    try:
        waiters = [
            _MailsThenWaits.start(_Sets.start(dispatcher=d), dispatcher=d) for _ in range(size)
        ]
        for _ in range(20):
            asked = [w.ask("go", block=False) for w in waiters]
            assert [a.get(timeout=WAIT) for a in asked] == [True] * size
        for w in waiters:
            w.stop()
    finally:
        assert d.close(WAIT) == []


class _MailsThenWaitsUnsaid(PooledActor):
    """On "mail": mails ``to`` (in line, for this thread after its turn), then waits until the
    test has put its next message, so both are one drain. On "wait": waits for the answer
    without saying it blocks (a store write, an ask: a step the dispatcher cannot see)."""

    def __init__(self, to: Any, answered: threading.Event, next_put: threading.Event) -> None:
        super().__init__()
        self.to, self.answered, self.next_put = to, answered, next_put

    def on_receive(self, message: str) -> bool:
        if message == "mail":
            self.to.tell(self.answered)
            return self.next_put.wait(WAIT)
        return self.answered.wait(WAIT)


def test_a_drain_that_goes_on_to_its_next_message_hands_on_what_it_mailed() -> None:
    """A handling mails another actor, and the same drain goes on to the actor's next
    message, which waits (unseen by the dispatcher) for what it mailed: the nudge owed for
    the mail is paid before that next message, so a parked thread takes it. No watch thread
    looks (``stall_s`` never reached)."""
    d = Dispatcher(size=2, stall_s=3600.0, name="t-handoff-next-message")
    try:
        answered, next_put = threading.Event(), threading.Event()
        sets = _Sets.start(dispatcher=d)
        actor = _MailsThenWaitsUnsaid.start(sets, answered, next_put, dispatcher=d)
        mailed = actor.ask("mail", block=False)
        waited = actor.ask("wait", block=False)
        next_put.set()
        assert mailed.get(timeout=WAIT) is True
        assert waited.get(timeout=WAIT) is True  # answered while this drain went on
        actor.stop()
        sets.stop()
    finally:
        assert d.close(WAIT) == []


class _BlocksThenMailsAndWaits(PooledActor):
    """Says it blocks first (a sync function agent: ``about_to_block`` as it is called), then
    mails ``to`` (``ctx.send``: flushed at once) and waits for the answer without a word (a
    ``time.sleep``, an ``Event.wait``, a C call: nothing pays a nudge)."""

    def __init__(self, to: Any) -> None:
        super().__init__()
        self.to = to

    def on_receive(self, message: object) -> bool:
        about_to_block()
        answered = threading.Event()
        self.to.tell(answered)
        return answered.wait(WAIT)


@pytest.mark.parametrize("size", [1, 2])
def test_what_a_thread_counted_as_blocked_mails_is_taken_by_another_at_once(size: int) -> None:
    """A thread counted as blocked (it said so, or the watch thread saw it stall) is not
    taking turns: its drain may go on for as long as the user's code waits. What it mails is
    handed to a parked thread at once. Left in line for it, with a nudge owed that nothing
    it did next paid, the mail waited for the end of its turn (here, the answer it waits
    for: never; a parked thread was there, so no replacement was started, and the watch
    thread never looks at a thread already replaced)."""
    d = Dispatcher(size=size, stall_s=3600.0, name="t-handoff-blocked-mails")
    try:
        waiter = _BlocksThenMailsAndWaits.start(_Sets.start(dispatcher=d), dispatcher=d)
        for _ in range(20):
            assert waiter.ask("go", timeout=2 * WAIT) is True
        waiter.stop()
    finally:
        assert d.close(WAIT) == []
