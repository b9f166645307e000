"""A pooled actor's turn when its user code raises a ``BaseException`` (``SystemExit``,
``KeyboardInterrupt``): in a handling of an ask, in ``on_start``, in ``on_stop``. The actor
stops (that actor only: the module doc of ``actors/pooled.py``), the asker hears an error
naming what was raised, and the turn is let go: every ask put after it is refused
``ActorDeadError``, not left unanswered in a mailbox nobody drains.

Real actors on a real ``Dispatcher``; every wait is on a future with a timeout (without the
fixes, the asks below waited for ever: their ``get`` timed out).
"""

from __future__ import annotations

import threading
from typing import Any

import pykka
import pytest

from subagents.actors.pooled import Dispatcher
from subagents.actors.pooled_actor import PooledActor

WAIT = 30.0


class Echo(PooledActor):
    def on_receive(self, message: Any) -> Any:
        return message


def _others_still_served(dispatcher: Dispatcher) -> None:
    other = Echo.start(dispatcher=dispatcher)
    assert other.ask("still served", timeout=WAIT) == "still served"
    other.stop(timeout=WAIT)
    assert dispatcher.live == 0


@pytest.mark.parametrize("raised", [SystemExit(3), KeyboardInterrupt()])
def test_an_ask_whose_handling_raises_a_base_exception_is_answered_naming_it(
    dispatcher: Dispatcher, raised: BaseException
) -> None:
    """pykka's own loop stops every actor and leaves that ask unanswered; here the asker
    hears ``ActorDeadError`` naming what was raised (and it is the error's cause), the
    actor stops (``on_stop`` runs, as pykka's ``_stop``), the asks behind it are refused."""
    entered, gate, stopped = threading.Event(), threading.Event(), threading.Event()

    class Quitting(PooledActor):
        def on_receive(self, message: Any) -> Any:
            entered.set()
            assert gate.wait(WAIT)
            raise raised

        def on_stop(self) -> None:
            stopped.set()

    ref = Quitting.start(dispatcher=dispatcher)
    asked = ref.ask("quit", block=False)
    assert entered.wait(WAIT)
    behind = ref.ask("behind it", block=False)  # in the mailbox while the handling raises
    gate.set()
    with pytest.raises(pykka.ActorDeadError, match=type(raised).__name__) as caught:
        asked.get(timeout=WAIT)
    assert caught.value.__cause__ is raised
    with pytest.raises(pykka.ActorDeadError, match="stopped before handling"):
        behind.get(timeout=WAIT)
    assert stopped.wait(WAIT)
    with pytest.raises(pykka.ActorDeadError):
        ref.ask("after", timeout=WAIT)
    assert not ref.is_alive()
    _others_still_served(dispatcher)


def test_a_base_exception_in_on_start_stops_its_actor_and_refuses_its_asks(
    dispatcher: Dispatcher,
) -> None:
    """As an ``Exception`` in ``on_start`` (``test_dispatcher``): the actor stops without
    ``on_stop``, uncounted, every ask refused. (It escaped the drain: the turn stayed held,
    the asks put before and after waited for ever.)"""
    gate, stopped = threading.Event(), threading.Event()

    class Interrupted(PooledActor):
        def on_start(self) -> None:
            assert gate.wait(WAIT)
            raise KeyboardInterrupt

        def on_stop(self) -> None:
            stopped.set()

    ref = Interrupted.start(dispatcher=dispatcher)
    first = ref.ask("first", block=False)  # put before the start ends
    gate.set()
    with pytest.raises(pykka.ActorDeadError):
        first.get(timeout=WAIT)
    with pytest.raises(pykka.ActorDeadError):
        ref.ask("after", timeout=WAIT)
    assert not ref.is_alive() and not stopped.is_set()
    _others_still_served(dispatcher)


def test_a_base_exception_in_on_stop_still_answers_the_stop(dispatcher: Dispatcher) -> None:
    """``on_stop`` raising ``SystemExit``: the stop is answered and the asks put behind it
    refused. (It was called twice, the second raise escaped the drain: the stop's ask and
    everything behind it waited for ever.)"""
    calls: list[str] = []

    class Exiting(PooledActor):
        def on_stop(self) -> None:
            calls.append("on_stop")
            raise SystemExit(1)

    ref = Exiting.start(dispatcher=dispatcher)
    stopping = ref.stop(block=False)
    behind = ref.ask("behind the stop", block=False)
    assert stopping.get(timeout=WAIT) is True
    with pytest.raises(pykka.ActorDeadError):
        behind.get(timeout=WAIT)
    assert calls == ["on_stop"]
    _others_still_served(dispatcher)
