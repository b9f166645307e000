"""Mailbox: a pooled actor's turn, taken by the put that finds it idle and let go by the drain
that finds the mailbox empty, stepped through by hand (each step as one thread makes it, in
the orders two threads can interleave them): nothing left behind, never handed on twice.

Real ``Mailbox`` objects; the dispatcher is a list of the actors handed to it, so that what
a thread would then drain is the test's to do, step by step.
"""

from __future__ import annotations

from typing import Any

import pykka
import pytest
from pykka._envelope import Envelope

from subagents.actors.inbox import actor_urn
from subagents.actors.latch_future import LatchFuture
from subagents.actors.mailbox import Mailbox


class Handed:
    """A dispatcher that only notes each actor handed to it (``Submits``)."""

    def __init__(self) -> None:
        self.actors: list[Any] = []

    def submit(self, actor: Any) -> None:
        self.actors.append(actor)


class Actor:
    actor_urn = actor_urn()


def _started() -> tuple[Mailbox, Handed, Actor]:
    mailbox, handed, actor = Mailbox(), Handed(), Actor()
    mailbox.bind(actor, handed)
    assert mailbox.schedule()  # its start: the turn held since it was made is the start's
    assert not mailbox.schedule()
    return mailbox, handed, actor


def test_a_message_put_before_the_start_waits_for_it_and_is_not_handed_on_twice() -> None:
    mailbox, handed, actor = Mailbox(), Handed(), Actor()
    mailbox.tell("early")  # (listed before its loop runs: a mail can come that early)
    mailbox.bind(actor, handed)
    mailbox.tell("bound, not started")
    assert handed.actors == []  # the start hands it on, not a put
    assert mailbox.schedule()
    assert [mailbox.get().message, mailbox.get().message] == ["early", "bound, not started"]


def test_a_put_while_the_turn_is_held_hands_nothing_on_and_the_drain_takes_it() -> None:
    mailbox, handed, actor = _started()
    mailbox.tell("first")
    mailbox.tell("second")
    assert handed.actors == []  # the start's drain holds the turn
    assert mailbox.get().message == "first"
    assert mailbox.get().message == "second"
    assert mailbox.unschedule_if_empty()  # empty: the turn let go
    mailbox.tell("third")
    assert handed.actors == [actor]  # that put took the turn: handed on once
    mailbox.tell("fourth")
    assert handed.actors == [actor]


def test_a_put_between_the_drain_finding_it_empty_and_letting_go_is_taken_back() -> None:
    """The race: the drain saw no message; a put comes (the turn still held: it hands
    nothing on); the drain lets the turn go. Let go for good, that message would wait for a
    put that may never come."""
    mailbox, handed, _ = _started()
    assert mailbox.empty()  # the drain looks: nothing
    mailbox.tell("racing")  # a put, before the drain lets the turn go
    assert handed.actors == []
    assert not mailbox.unschedule_if_empty()  # taken back: the drain goes on
    assert mailbox.get().message == "racing"
    assert mailbox.unschedule_if_empty()
    assert handed.actors == []


def test_after_the_close_an_ask_is_refused_and_a_tell_dropped_by_whoever_puts() -> None:
    mailbox, handed, actor = _started()
    assert mailbox.close_if_empty(actor)
    asked: pykka.Future[Any] = LatchFuture()
    mailbox.tell("told")
    mailbox.put(Envelope("asked", reply_to=asked))
    with pytest.raises(pykka.ActorDeadError, match=r"Actor .* stopped before handling"):
        asked.get(timeout=1.0)
    assert mailbox.empty()
    assert handed.actors == []  # a closed mailbox hands nobody on


def test_a_close_with_a_message_in_it_is_refused_until_the_teardown_took_it() -> None:
    mailbox, _, actor = _started()
    mailbox.tell("in it")
    assert not mailbox.close_if_empty(actor)
    assert mailbox.get().message == "in it"  # (pykka's teardown: an envelope, even for a tell)
    assert mailbox.close_if_empty(actor)


def test_a_put_while_the_close_lets_the_turn_go_is_refused_by_the_close() -> None:
    """The race at the close: the drain found the mailbox empty and closes it; an ask comes
    before the turn is let go (so its putter cannot take the turn). Not looked at again,
    that ask would never be answered. (The put is made while the close names the actor: the
    step between its look and its letting go.)"""
    asked: pykka.Future[Any] = LatchFuture()
    mailbox, handed = Mailbox(), Handed()

    class Racing:
        @property
        def actor_urn(self) -> str:
            mailbox.put(Envelope("asked", reply_to=asked))  # the turn held: hands nothing on
            return "urn:racing"

    actor = Racing()
    mailbox.bind(actor, handed)
    assert mailbox.schedule()
    assert mailbox.close_if_empty(actor)
    with pytest.raises(pykka.ActorDeadError, match=r"Racing \(urn:racing\) stopped before"):
        asked.get(timeout=1.0)
    assert mailbox.empty()
    assert handed.actors == []
