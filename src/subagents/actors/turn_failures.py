"""What a pooled actor's turn does when a handling raises (``PooledActor._drain``).

Apart from ``pooled.py`` because it is off the turn's path: a concept of its own (pykka's
loop's ``except`` clauses, and where a pooled actor does better), read only when user code
raised.

An ``Exception``: as pykka's loop, an ask's asker gets it, a tell's stops the actor
(``on_failure`` called). A ``BaseException`` that is not an ``Exception`` (``SystemExit``,
``KeyboardInterrupt`` raised by user code on a dispatcher thread): pykka stops every actor of
the process (``ActorRegistry.stop_all``) and leaves the ask whose handling raised it
unanswered; here it stops that actor only (``on_stop`` called, as pykka's ``_stop``), and
that ask's asker hears ``ActorDeadError`` naming what was raised (its ``__cause__``), at
once, instead of waiting for ever (or to its timeout). Either way the turn goes on to the
teardown: what is left in the mailbox is refused ``ActorDeadError``, the turn let go.
"""

from __future__ import annotations

import sys
from typing import Any

import pykka

from subagents.logs import get_logger

log = get_logger("subagents.dispatch")


def handling_failed(actor: pykka.Actor, reply_to: pykka.Future[Any] | None) -> None:
    """``actor``'s handling raised (the exception being handled now); ``reply_to``: the
    ask's future, None for a tell. (An ask's ``Exception`` is answered by the caller.)"""
    raised = sys.exc_info()[1]
    if not isinstance(raised, Exception):
        _stopped_by(actor, raised, reply_to)
        return
    actor._handle_failure(*sys.exc_info())
    try:
        actor.on_failure(*sys.exc_info())
    except BaseException:  # (pykka: ``Exception``; a BaseException escaped the turn)
        actor._handle_failure(*sys.exc_info())


def _stopped_by(
    actor: pykka.Actor, raised: BaseException | None, reply_to: pykka.Future[Any] | None
) -> None:
    log.error("stopping an actor after a BaseException", actor=str(actor), exc_info=True)
    if not actor.actor_stopped.is_set():
        actor._stop()
    if reply_to is not None:
        dead = pykka.ActorDeadError(
            f"{actor} stopped: its handling of the message raised {raised!r}"
        )
        dead.__cause__ = raised
        reply_to.set_exception(exc_info=(pykka.ActorDeadError, dead, None))
