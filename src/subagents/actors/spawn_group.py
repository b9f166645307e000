"""Root spawns told to the supervisor and queued together, admitted as one decision.

Why: a root spawn decided alone pays a decision, a store transaction and a round of effects
of its own; ``Runtime.spawn_many`` pays them once for a whole batch (``benchmarks/
scale.py``: less than half the supervisor's CPU per run). ``Runtime.spawn`` and ``run``
TELL their request and return without waiting for the admission, so a caller spawning in a
loop (or many threads spawning at once) queues many of them while the supervisor decides
one. When the supervisor takes a root spawn from its inbox, it also takes the root spawns
queued right behind it (never waiting for more) and admits them together, as
``spawn_many`` admits its jobs: each in order, each counted against the limits of the ones
after it, a refused one refusing only itself (told to the outside on its own,
``TellOutside``). The outside then hears once for the whole group that they are decided
(``SpawnsDecided``, after their records are committed: it releases the caller's window,
``runtime/_spawn_window``). The first message that is not a root spawn goes back to the
front of the inbox: the order of the inbox is kept.

A run's own spawns come in its step's ``Batch``: consecutive ones there (``step_spawn``) are
decided together too, up to ``STEP_SPAWNS_MOST`` at a time (``SupervisorActor._step_spawns``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TypeGuard

import pykka

from subagents.messages import SpawnMany, SpawnRequest

GROUP_MOST = 1000
"""Most root spawns admitted in one decision (``spawn_many``'s batches are of this size)."""


STEP_SPAWNS_MOST = 100
"""Most spawns of one run's step (a ``Batch``'s consecutive ``SpawnRequest``s) admitted in
one decision: a step that spawns 1,000 has its first children started after 100 decisions,
not after all of them."""


def spawns_end(messages: tuple[Any, ...], i: int) -> int:
    """Where the run of spawns that may be admitted together, from ``messages[i]`` (one),
    ends: at the first other message, or after ``STEP_SPAWNS_MOST``."""
    end = min(len(messages), i + STEP_SPAWNS_MOST)
    j = i + 1
    while j < end and step_spawn(messages[j]):
        j += 1
    return j


def step_spawn(message: Any) -> TypeGuard[SpawnRequest]:
    """A spawn a run's step may have decided with the spawns next to it in its ``Batch``
    (a continuation reads its run from the store first, so it is decided alone)."""
    return type(message) is SpawnRequest and message.continues is None


def groupable(message: Any) -> TypeGuard[SpawnRequest]:
    """A root spawn's request (a run's own spawns go with its other reports; a continuation
    reads its run from the store first, and is asked: it is decided alone)."""
    return (
        type(message) is SpawnRequest
        and message.continues is None
        and message.parent_run_id is None
    )


def take_queued(actor: pykka.Actor, requests: list[SpawnRequest]) -> Any:
    """Add to ``requests`` the root spawns told and queued right behind them in ``actor``'s
    inbox; the first envelope that is not one (None: the inbox ran empty, or the group is
    full)."""
    inbox: Any = actor.actor_inbox  # a ``SimpleQueue`` (``actors.inbox``)
    while len(requests) < GROUP_MOST:
        if inbox.empty():  # (only this thread takes from it) cheaper than queue.Empty
            return None
        envelope = inbox.get(block=False)
        message = envelope.message
        if envelope.reply_to is not None or not groupable(message):
            return envelope
        requests.append(message)
    return None


def decide_together(
    actor: pykka.Actor,
    first: SpawnRequest,
    decide: Callable[[SpawnRequest | SpawnMany], Any],
    on_decided: Callable[[list[SpawnRequest], BaseException | None], None],
) -> None:
    """Decide ``first`` with the root spawns told behind it (``decide``: the supervisor's
    handling of a ``SpawnMany``, or of ``first`` alone when nothing is queued behind it),
    then hand them to ``on_decided``, with the error of the whole decision if it failed
    (the store failed, a bug: then raised too)."""
    requests = [first]
    after = take_queued(actor, requests)
    try:
        try:
            decide(requests[0] if len(requests) == 1 else SpawnMany(requests=tuple(requests)))
        except BaseException as exc:
            on_decided(requests, exc)
            raise
        on_decided(requests, None)
    finally:
        if after is not None:
            handle_envelope(actor, after)


def handle_envelope(actor: pykka.Actor, envelope: Any) -> None:
    """Handle ``envelope`` as pykka's loop does (``ThreadingActor._actor_loop_running``):
    its answer, or the error raised handling it, to an asker; a failed tell to the actor's
    failure handling. A ``BaseException`` goes up to pykka's loop, as from any handling."""
    reply_to = envelope.reply_to
    try:
        response = actor._handle_receive(envelope.message)
    except Exception:
        if reply_to is not None:
            reply_to.set_exception()
            return
        actor._handle_failure(*sys.exc_info())
        try:
            actor.on_failure(*sys.exc_info())
        except Exception:
            actor._handle_failure(*sys.exc_info())
        return
    if reply_to is not None:
        reply_to.set(response)
