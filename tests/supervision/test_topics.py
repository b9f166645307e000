"""Topics without threads: subscriptions per tree, mail to ``topic:NAME`` resolved to one
ordinary mail per subscriber (in the order they subscribed, the sender left out), nothing
sent without a subscriber, no old mail for a late subscriber, subscriptions that end with
their run and survive a restore."""

from __future__ import annotations

import pytest

from subagents.definitions.spec import AgentSpec
from subagents.messages import (
    EXTERNAL_SENDER,
    DeliverMail,
    MailAck,
    RunFinished,
    SendMail,
    Subscribe,
    Subscription,
    new_id,
    topic_problem,
)
from subagents.supervision.core import SupervisorCore
from subagents.supervision.limits import Limits
from subagents.supervision.topics import Topics, topic_of

from .test_core import Driven, Harness, told


def subscribe(h: Harness, run_id: str, topic: str, on: bool = True) -> None:
    h.core._do(h.core.core.subscribe(Subscribe(run_id=run_id, topic=topic, subscribe=on)))


def publish(h: Harness, sender: str, topic: str, text: str) -> tuple[MailAck, list[object]]:
    msg = SendMail(request_id=new_id("q"), sender=sender, to=f"topic:{topic}", content=text)
    ack, effects = h.core.send_mail(msg)
    return ack, list(effects)


def delivered(effects: list[object], run_id: str) -> list[str]:
    return [m.content for d in told(effects, run_id, DeliverMail) for m in d.mails]  # type: ignore[arg-type]


def test_topic_names_and_addresses() -> None:
    assert topic_of("topic:reviews") == "reviews" and topic_of("r1a2b3") is None
    assert topic_of("topic:build/linux-x86_64.v2") == "build/linux-x86_64.v2"
    with pytest.raises(ValueError, match="bad topic name '': 1 to 100 letters"):
        topic_of("topic:")
    assert topic_problem("a b") is not None and topic_problem("x" * 101) is not None
    assert topic_problem(3) == "a topic must be a string, got int"


def test_the_table_keeps_subscription_order_per_tree_and_drops_a_run() -> None:
    topics = Topics()
    assert topics.subscribe("b", "root1", "news") and topics.subscribe("a", "root1", "news")
    assert not topics.subscribe("a", "root1", "news")  # already
    topics.subscribe("c", "root2", "news")
    assert topics.subscribers("root1", "news", sender="x") == ("b", "a")
    assert topics.subscribers("root1", "news", sender="b") == ("a",)
    assert topics.subscribers("root2", "news", sender="x") == ("c",)
    topics.subscribe("a", "root1", "alerts")
    assert topics.drop("a") == ("alerts", "news") and "a" not in topics
    assert topics.subscribers("root1", "news", sender="x") == ("b",)
    assert not topics.unsubscribe("a", "news")


def test_a_topic_mail_reaches_every_subscriber_of_the_tree_once_in_order() -> None:
    h = Harness()
    lead = h.run("lead")
    first, second = h.run("worker", lead), h.run("critic", lead)
    other_tree = h.run("worker", h.run("lead"))
    subscribe(h, second, "reviews")
    subscribe(h, first, "reviews")
    subscribe(h, lead, "reviews")  # the sender: it does not get its own mail
    subscribe(h, other_tree, "reviews")  # another tree's topic of the same name
    ack, effects = publish(h, lead, "reviews", "one")
    assert ack.error is None and ack.recipient == "topic:reviews"
    assert ack.recipients == (second, first) and ack.mail_id is not None
    assert delivered(effects, second) == ["one"] and delivered(effects, first) == ["one"]
    assert delivered(effects, lead) == [] and delivered(effects, other_tree) == []
    _, effects = publish(h, lead, "reviews", "two")
    assert delivered(effects, first) == ["two"]
    # each is an ordinary mail, kept: the recipient, the topic and the sender's one request
    kept = [m for m in h.store.mail_for(first) if m.sender == lead]
    assert [(m.content, m.topic, m.recipient) for m in kept] == [
        ("one", "reviews", first),
        ("two", "reviews", first),
    ]
    assert h.unread(first) == [m.mail_id for m in kept]


def test_no_subscriber_sends_nothing_and_a_late_subscriber_gets_no_old_mail() -> None:
    h = Harness()
    lead = h.run("lead")
    worker = h.run("worker", lead)
    ack, effects = publish(h, lead, "news", "too early")
    assert ack.error is None and ack.recipients == () and ack.mail_id is None
    assert h.store.mail_for(lead) == [] and delivered(effects, worker) == []
    subscribe(h, worker, "news")
    _, effects = publish(h, lead, "news", "now")
    assert delivered(effects, worker) == ["now"]
    subscribe(h, worker, "news", on=False)
    ack, _ = publish(h, lead, "news", "after")
    assert ack.recipients == ()


def test_bad_topic_and_the_outside_are_refused_naming_why() -> None:
    h = Harness()
    lead = h.run("lead")
    ack, _ = publish(h, lead, "no spaces", "x")
    assert ack.error is not None and ack.error.startswith("bad topic name 'no spaces'")
    ack, _ = h.core.send_mail(
        SendMail(request_id="q1", sender=EXTERNAL_SENDER, to="topic:news", content="x")
    )
    assert ack.error == "mail to topic:news must come from a run: a topic belongs to a run's tree"


def test_a_definitions_topics_subscribe_its_runs_from_admission_queued_ones_too() -> None:
    lead = AgentSpec(name="lead", description="d")
    watcher = AgentSpec(name="watcher", description="d", topics=("alerts",))
    h = Harness(Limits(max_concurrency=2), lead, watcher)
    root = h.run("lead")
    first = h.run("watcher", root)
    queued = h.spawn("watcher", root)  # the limit: it waits in the queue, subscribed
    assert queued.queued and queued.run_id is not None
    assert [(s.run_id, s.topic) for s in h.store.subscriptions()] == [
        (first, "alerts"),
        (queued.run_id, "alerts"),
    ]
    ack, effects = publish(h, root, "alerts", "fire")
    assert ack.recipients == (first, queued.run_id)
    assert delivered(effects, first) == ["fire"]
    assert h.unread(queued.run_id) != []  # kept for it until it starts


def test_subscriptions_are_kept_end_with_their_run_and_survive_a_restore() -> None:
    h = Harness()
    lead = h.run("lead")
    worker, critic = h.run("worker", lead), h.run("critic", lead)
    subscribe(h, worker, "news")
    subscribe(h, critic, "news")
    subscribe(h, critic, "alerts")
    keep = h.store.subscriptions()
    assert [(s.run_id, s.topic) for s in keep] == [
        (worker, "news"),
        (critic, "news"),
        (critic, "alerts"),
    ]
    h.core.finished(RunFinished(run_id=critic, result="done"))
    assert h.store.subscriptions() == [Subscription(run_id=worker, root_run_id=lead, topic="news")]
    # the same store taken up by a new core (as after a crash): still subscribed
    again = Driven(
        SupervisorCore(
            lookup=h.specs.get,
            names=lambda: list(h.specs),
            read_run=h.store.get_run,
            limits=Limits(),
            owner=h.core.core.owner,
        ),
        h.store,
    )
    again.restore()
    msg = SendMail(request_id=new_id("q"), sender=lead, to="topic:news", content="after")
    ack, effects = again.send_mail(msg)
    assert ack.recipients == (worker,)
    assert delivered(list(effects), worker) == ["after"]


@pytest.mark.parametrize("how", ["the runtime closes", "the store works again"])
def test_every_runs_subscriptions_end_when_all_runs_end_at_once(how: str) -> None:
    """``close_all`` (a close, or the store working again and the runtime going on) ends
    the subscriptions a ``finish`` would: none left in memory nor in the store."""
    h = Harness()
    lead = h.run("lead")
    worker, other = h.run("worker", lead), h.run("lead")
    subscribe(h, worker, "news")
    subscribe(h, other, "alerts")
    subscribe(h, other, "news")
    assert len(h.store.subscriptions()) == 3
    if how == "the runtime closes":
        h.core.stop_all("runtime closed")
    else:
        h.core._do(h.core.core.store_recovered("disk full", []))
    topics = h.core.core.mail.topics
    assert worker not in topics and other not in topics
    assert topics.subscribers(lead, "news", sender="x") == ()
    assert topics.subscribers(other, "alerts", sender="x") == ()
    assert h.store.subscriptions() == []
    if how == "the runtime closes":  # nothing is admitted after a close (test_core.py)
        return
    # the runtime goes on: new runs subscribe and hear as before
    again = h.run("lead")
    hearer = h.run("worker", again)
    subscribe(h, hearer, "news")
    ack, effects = publish(h, again, "news", "still here")
    assert ack.recipients == (hearer,) and delivered(effects, hearer) == ["still here"]
