"""A pooled actor's turn under many threads at once: senders putting bare tells (a mail
delivered straight), pykka tells and asks while the actor drains, lets its turn go, is
stopped (by its stop message, or by a ``BaseException`` in a handling) and lets its mailbox
go. Whatever the interleaving: never two handlings at once, each sender's order kept,
``on_start`` before the first and ``on_stop`` after the last, every ask answered (its reply,
or ``ActorDeadError`` when it came after the stop) and the ended actor freed by reference
counting alone.

Real actors on a real dispatcher; the GIL handed over as often as it can be. The outcome is
checked, never the timing: each wait is on a future with a timeout.
"""

from __future__ import annotations

import contextlib
import gc
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pykka
import pytest

from subagents.actors.mailbox import Mailbox
from subagents.actors.pooled import Dispatcher
from subagents.actors.pooled_actor import PooledActor

from .conftest import at_once

WAIT = 60.0
SENDERS = 4
PER_SENDER = 150
STOP_AT = 100
"""The first sender stops the actor after putting this many of its messages."""
ROUNDS = 300


def _box(ref: pykka.ActorRef[Any]) -> Mailbox:
    box = ref.actor_inbox
    assert isinstance(box, Mailbox)
    return box


class Dying(BaseException):
    """Raised by a handling: pykka's loop stops the actor (a ``BaseException``)."""


@pytest.fixture
def dispatcher(dispatcher: Dispatcher) -> Iterator[Dispatcher]:
    """The runtime tests' dispatcher (conftest.py), its threads switched as often as CPython
    can while the test runs (a switch between any two bytecodes of a put and a drain)."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield dispatcher
    finally:
        sys.setswitchinterval(before)


class Watched(PooledActor):
    """Notes what it handles, and every breach of one-at-a-time and of start/stop order."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[Any] = []
        self.one = threading.Lock()  # taken by a handling: taken already = two at once
        self.breaches: list[str] = []
        self.started = self.stopped = False

    def on_start(self) -> None:
        self.started = True

    def on_stop(self) -> None:
        if self.stopped:
            self.breaches.append("on_stop twice")
        self.stopped = True

    def on_receive(self, message: Any) -> Any:
        if not self.one.acquire(False):
            self.breaches.append("two handlings at once")
            return None
        try:
            if not self.started or self.stopped:
                self.breaches.append(f"{message!r} handled outside start..stop")
            if message == "die":
                raise Dying
            self.seen.append(message)
            return message
        finally:
            self.one.release()


def _send(
    refs: list[pykka.ActorRef[Any]], sender: int, go: threading.Event, stop_by: str
) -> list[tuple[tuple[int, int], pykka.Future[Any]]]:
    """Sender ``sender``'s messages to each actor, a bare tell, a pykka tell or an ask in
    turn; the first sender stops each actor midway (``stop_by``). Its asks, to be checked."""
    asked: list[tuple[tuple[int, int], pykka.Future[Any]]] = []
    assert go.wait(WAIT)
    for seq in range(PER_SENDER):
        if sender == 0 and seq == STOP_AT:
            for ref in refs:
                if stop_by == "stop":
                    ref.stop(block=False)
                else:
                    _box(ref).tell("die")
        for ref in refs:
            how = (sender + seq) % 3
            if how == 0:
                _box(ref).tell((sender, seq))  # (never refused: dropped after the stop)
            elif how == 1:
                with contextlib.suppress(pykka.ActorDeadError):  # (stopped: its ref says so)
                    ref.tell((sender, seq))
            else:
                asked.append(((sender, seq), ref.ask((sender, seq), block=False)))
    return asked


@pytest.mark.parametrize("stop_by", ["stop", "base_exception"])
def test_puts_asks_and_a_stop_from_many_threads_keep_order_one_at_a_time(
    dispatcher: Dispatcher, stop_by: str
) -> None:
    refs = [Watched.start(dispatcher=dispatcher) for _ in range(8)]
    actors = [ref._actor_weakref for ref in refs]
    held = [weak() for weak in actors]  # (what each handled is read after its end)
    go = threading.Event()
    results: dict[int, list[tuple[tuple[int, int], pykka.Future[Any]]]] = {}

    failed: list[BaseException] = []

    def send(sender: int) -> None:
        try:
            results[sender] = _send(refs, sender, go, stop_by)
        except BaseException as exc:  # (a put that raised: the test's failure, not a hang)
            failed.append(exc)
            raise

    at_once(send, SENDERS, go)
    assert failed == []
    asks = [one for sender in range(SENDERS) for one in results[sender]]
    refused = 0
    for key, future in asks:  # every ask answered: none lost in the stop's race
        try:
            assert future.get(timeout=WAIT) == key
        except pykka.ActorDeadError:
            refused += 1
        else:  # (the first sender's asks put after its stop are never handled)
            assert key[0] != 0 or key[1] < STOP_AT
    assert refused  # (each actor stopped before the senders were done)
    assert dispatcher.wait_idle(WAIT)
    for ref, actor in zip(refs, held, strict=True):
        assert actor is not None
        assert actor.breaches == []
        assert actor.stopped
        for sender in range(SENDERS):  # each sender's messages in the order it put them
            seqs = [seq for (s, seq) in actor.seen if s == sender]
            assert seqs == sorted(seqs)
            assert len(seqs) == len(set(seqs))  # none twice
        assert all(seq < STOP_AT for (s, seq) in actor.seen if s == 0)  # put after its stop
        assert _box(ref).empty()
        assert _box(ref)._actor is None  # its mailbox let it go
    del actor, held
    gc.disable()  # only reference counting frees them now
    try:
        assert [weak() for weak in actors] == [None] * len(actors)
    finally:
        gc.enable()


def test_no_message_is_left_in_a_mailbox_nobody_drains(dispatcher: Dispatcher) -> None:
    """Rounds of bare tells from many threads at once, each round until the dispatcher is
    idle: then every mailbox is empty. A message put between a drain finding the mailbox
    empty and letting its turn go, and not taken back, would wait there for the next put (in
    a run: a mail nobody reads until another comes)."""
    refs = [Watched.start(dispatcher=dispatcher) for _ in range(8)]
    held = [ref._actor_weakref() for ref in refs]
    for round_ in range(ROUNDS):
        go = threading.Event()

        def send(sender: int, round_: int = round_, go: threading.Event = go) -> None:
            assert go.wait(WAIT)
            for seq in range(2):
                for ref in refs:
                    _box(ref).tell((sender, round_ * 2 + seq))

        at_once(send, SENDERS, go)
        assert dispatcher.wait_idle(WAIT)
        left = [len(_box(ref)) for ref in refs]
        assert left == [0] * len(refs), f"round {round_}: left in mailboxes nobody drains"
    for actor in held:
        assert actor is not None
        assert actor.breaches == []
        assert len(actor.seen) == SENDERS * ROUNDS * 2
    for ref in refs:
        ref.stop(timeout=WAIT)
