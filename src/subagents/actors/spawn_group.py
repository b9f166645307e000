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

from subagents.messages import Ask, SpawnMany, SpawnReply, SpawnRequest

GROUP_MOST = 1000
"""Most root spawns admitted in one decision (``spawn_many``'s batches are of this size)."""


class FrontedInbox(queue.SimpleQueue[Any]):
    """The supervisor's inbox: a C ``SimpleQueue`` (``actors.inbox``) with a front place,
    where a message taken out to look at, and not grouped, goes back to be handled next.
    Only the actor's own thread takes from it (``get``, ``take``, ``give_back``)."""

    def __init__(self) -> None:
        super().__init__()
        self._front: Any = None

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        front = self._front
        if front is not None:
            self._front = None
            return front
        return super().get(block, timeout)

    def empty(self) -> bool:
        return self._front is None and super().empty()

    def take(self) -> Any:
        """The next message if one is queued now, else None (never waits)."""
        try:
            return self.get(block=False)
        except queue.Empty:
            return None

    def give_back(self, envelope: Any) -> None:
        """``envelope`` is handled next (it was taken by ``take``)."""
        assert self._front is None
        self._front = envelope


def groupable(message: Any) -> TypeGuard[SpawnRequest]:
    """A root spawn's request asked (a run's own spawns are told; a continuation reads its
    run from the store first, so it is decided alone)."""
    return type(message) is SpawnRequest and message.continues is None


def answer_together(
    inbox: FrontedInbox,
    first: SpawnRequest,
    decide: Callable[[SpawnRequest | SpawnMany], Any],
) -> SpawnReply:
    """``first``'s answer, decided with the root spawn asks queued behind it (``decide``:
    the supervisor's handling of an asked message, here a ``SpawnMany``; of ``first`` alone
    when nothing is queued behind it); the others are answered here, in order.
    An error of the whole decision (the store failed) is every one's."""
    requests = [first]
    futures: list[Any] = []
    while len(requests) < GROUP_MOST:
        envelope = inbox.take()
        if envelope is None:
            break
        message = envelope.message
        if type(message) is Ask and envelope.reply_to is not None and groupable(message.message):
            requests.append(message.message)
            futures.append(envelope.reply_to)
            continue
        inbox.give_back(envelope)
        break
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
