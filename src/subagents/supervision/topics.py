"""Topics: mail to ``topic:NAME`` reaches every run of the sender's tree subscribed to NAME.

Publish/subscribe (AutoGen's), as an address resolution step: a topic address resolves to
the runs subscribed to it now, and the mail becomes one ordinary mail to each (recorded,
delivered, read and returned as dead letters like any other; in order per sender, since each
is). Kept apart from the mail path so that any path that resolves addresses can ask it.

The decisions:
- **scope: the sender's tree.** Runs are isolated per tree (a run writes only to runs of its
  own tree), and two trees (two users' tasks, two runs of one team) using the same topic
  name must not hear each other. A topic is (root run, name).
- **the address**: ``topic:NAME``, NAME of 1 to 100 letters, digits and ``. _ - /``, starting
  with a letter or a digit (``topic:reviews``, ``topic:build/linux``).
- **no subscriber**: nothing is sent and nothing kept; the sender's acknowledgement says so
  (``recipients`` empty). Not an error: a publisher need not know who listens.
- **the sender** does not get its own mail, subscribed or not (a run cannot mail itself).
- **a late subscriber** gets what is sent from then on, not earlier mail.
- **subscribing**: a run's ``Subscribe`` (``ctx.subscribe``, the ``subscribe`` tool), or its
  definition's ``topics`` from its admission on (so mail sent while it is queued waits for
  it).
- **durable**: each subscription is a store row, written with the decision that makes it;
  a restore holds the subscriptions of the runs it takes up. A run's subscriptions end with
  it (dropped from the store in the transaction that ends it).

Plain data, no threads: the supervisor core holds one ``Topics`` (in its mail room).
"""

from __future__ import annotations

from collections.abc import Iterable

from subagents.messages import TOPIC_PREFIX, Subscribe, Subscription, topic_problem
from subagents.store.writes import DropSubscriptions, SaveSubscription
from subagents.supervision.effects import Decided
from subagents.supervision.runs import RunState


def topic_of(address: str) -> str | None:
    """The topic name of a ``topic:NAME`` address (checked: ``ValueError`` naming what is
    wrong), or None for any other address."""
    if not address.startswith(TOPIC_PREFIX):
        return None
    name = address[len(TOPIC_PREFIX) :]
    problem = topic_problem(name)
    if problem is not None:
        raise ValueError(problem)
    return name


class Topics:
    """Who is subscribed to what, per tree, in the order they subscribed."""

    def __init__(self) -> None:
        self._subscribers: dict[tuple[str, str], dict[str, None]] = {}
        """(root run, topic) -> the runs subscribed, in order (a dict as an ordered set)."""
        self._topics: dict[str, tuple[str, set[str]]] = {}
        """run -> (its root, the topics it is subscribed to)."""

    def __contains__(self, run_id: object) -> bool:
        """Whether ``run_id`` holds any subscription."""
        return run_id in self._topics

    def subscribe(self, run_id: str, root_run_id: str, topic: str) -> bool:
        """Subscribe ``run_id`` (of the tree ``root_run_id``) to ``topic``; whether that
        changed anything (False: it was already)."""
        root, topics = self._topics.setdefault(run_id, (root_run_id, set()))
        if topic in topics:
            return False
        topics.add(topic)
        self._subscribers.setdefault((root, topic), {})[run_id] = None
        return True

    def unsubscribe(self, run_id: str, topic: str) -> bool:
        """Whether ``run_id`` was subscribed to ``topic`` (it is not any more)."""
        held = self._topics.get(run_id)
        if held is None or topic not in held[1]:
            return False
        root, topics = held
        topics.discard(topic)
        if not topics:
            del self._topics[run_id]
        subscribers = self._subscribers[(root, topic)]
        del subscribers[run_id]
        if not subscribers:
            del self._subscribers[(root, topic)]
        return True

    def drop(self, run_id: str) -> tuple[str, ...]:
        """``run_id`` ended: its subscriptions end; the topics it had, sorted."""
        held = self._topics.get(run_id)
        if held is None:
            return ()
        topics = tuple(sorted(held[1]))
        for topic in topics:
            self.unsubscribe(run_id, topic)
        return topics

    def topics_of(self, run_id: str) -> tuple[str, ...]:
        """The topics ``run_id`` is subscribed to, sorted."""
        held = self._topics.get(run_id)
        return tuple(sorted(held[1])) if held is not None else ()

    def subscribers(self, root_run_id: str, topic: str, sender: str) -> tuple[str, ...]:
        """The runs of the tree ``root_run_id`` a mail from ``sender`` to ``topic`` goes to,
        in the order they subscribed (the sender left out)."""
        runs = self._subscribers.get((root_run_id, topic))
        if not runs:
            return ()
        return tuple(r for r in runs if r != sender)

    def decide(self, msg: Subscribe, state: RunState | None) -> Decided:
        """``msg`` from the run of ``state`` (None: not running, or an earlier start of
        it): subscribed or unsubscribed, and the store's write of it. A bad name changes
        nothing (the run's behaviour refused it before sending)."""
        decided = Decided()
        if state is None or topic_problem(msg.topic) is not None:
            return decided
        run_id, root = state.run_id, state.record.root_run_id
        if msg.subscribe:
            return self.join(run_id, root, (msg.topic,))
        if self.unsubscribe(run_id, msg.topic):
            decided.writes.append(DropSubscriptions(run_id, (msg.topic,)))
        return decided

    def join(self, run_id: str, root_run_id: str, topics: Iterable[str]) -> Decided:
        """Subscribe ``run_id`` to ``topics`` (names already checked: a ``Subscribe``, or
        its definition's ``topics`` at its admission); the store's writes of the new ones."""
        decided = Decided()
        for topic in topics:
            if self.subscribe(run_id, root_run_id, topic):
                sub = Subscription(run_id=run_id, root_run_id=root_run_id, topic=topic)
                decided.writes.append(SaveSubscription(sub))
        return decided

    def ended(self, run_id: str) -> Decided:
        """``run_id`` ended: its subscriptions end with it, in the store too."""
        decided = Decided()
        if self.drop(run_id):
            decided.writes.append(DropSubscriptions(run_id))
        return decided

    def ended_all(self) -> Decided:
        """Every run holding subscriptions ended at once (``closing.close_all``): all of
        them end, in the store too; the cost is per subscribed run, not per run ended."""
        decided = Decided()
        decided.writes.extend(DropSubscriptions(run_id) for run_id in self._topics)
        self._topics.clear()
        self._subscribers.clear()
        return decided

    def restore(self, subscriptions: Iterable[Subscription]) -> None:
        """Hold again the subscriptions a store kept (in the order they were made)."""
        for sub in subscriptions:
            self.subscribe(sub.run_id, sub.root_run_id, sub.topic)
