"""Root spawns asked by many callers at once, admitted by the supervisor as one decision.

Why: ``Runtime.spawn`` asks the supervisor for one run and waits for its admission; a
program that spawns from many threads (a server taking requests) has many such asks queued
in the supervisor's inbox at once. Decided one by one, each pays a decision, a store
transaction and a round of effects of its own; ``Runtime.spawn_many`` pays them once for a
whole batch (``benchmarks/scale.py``: less than half the supervisor's CPU per run). So when
the supervisor takes a root spawn's ask from its inbox, it also takes the root spawn asks
queued right behind it (never waiting for more) and admits them together, as
``spawn_many`` admits its jobs: each in order, each counted against the limits of the ones
after it, each answered on its own, a refused one refusing only itself. The first message
that is not such an ask goes back to the front of the inbox: the order of the inbox is kept.

A single caller that spawns in a loop has at most one ask queued (it waits for each
answer): for it nothing changes.
"""

from __future__ import annotations

import queue
import sys
from collections.abc import Callable
from typing import Any, TypeGuard

import pykka

from subagents.messages import Ask, SpawnMany, SpawnReply, SpawnRequest

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
    while j < end and groupable(messages[j]):
        j += 1
    return j


def groupable(message: Any) -> TypeGuard[SpawnRequest]:
    """A root spawn's request asked (a run's own spawns are told; a continuation reads its
    run from the store first, so it is decided alone)."""
    return type(message) is SpawnRequest and message.continues is None


def answer_together(
    actor: pykka.Actor,
    first: SpawnRequest,
    decide: Callable[[SpawnRequest | SpawnMany], Any],
) -> SpawnReply:
    """``first``'s answer, decided with the root spawn asks queued behind it (``decide``:
    the supervisor's handling of an asked message, here a ``SpawnMany``; of ``first`` alone
    when nothing is queued behind it); the others are answered here, in order.
    An error of the whole decision (the store failed) is every one's."""
    inbox: Any = actor.actor_inbox  # a ``SimpleQueue`` (``actors.inbox``)
    requests = [first]
    futures: list[Any] = []
    after = None
    while len(requests) < GROUP_MOST:
        try:
            envelope = inbox.get(block=False)
        except queue.Empty:
            break
        message = envelope.message
        if type(message) is Ask and envelope.reply_to is not None and groupable(message.message):
            requests.append(message.message)
            futures.append(envelope.reply_to)
            continue
        after = envelope
        break
    try:
        return _decided_together(first, requests, futures, decide)
    finally:
        if after is not None:
            handle_envelope(actor, after)


def _decided_together(
    first: SpawnRequest,
    requests: list[SpawnRequest],
    futures: list[Any],
    decide: Callable[[SpawnRequest | SpawnMany], Any],
) -> SpawnReply:
    if not futures:  # alone: decided as one spawn
        reply: SpawnReply = decide(first)
        return reply
    try:
        replies: tuple[SpawnReply, ...] = decide(SpawnMany(requests=tuple(requests)))
    except BaseException:
        failure = sys.exc_info()
        for future in futures:
            future.set_exception(failure)
        raise
    for future, reply in zip(futures, replies[1:], strict=True):
        future.set(reply)
    return replies[0]


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
