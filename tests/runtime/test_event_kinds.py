"""Subscribers that take only some kinds of event: the runtime's own ``Endings`` is
subscribed for a run's end only (it reads nothing else), so the two other events of a
trivial run no longer call it; every other subscriber still sees every event, in order."""

from __future__ import annotations

import functools
import logging
import sys
import threading
from collections.abc import Callable

import pykka
import pytest
import structlog

from subagents.actors.effector import Effector
from subagents.actors.timer import TimerService
from subagents.behaviour.function import AgentContext
from subagents.messages import Event, EventKind, RunStatus
from subagents.runtime import Runtime
from subagents.runtime._run_endings import END_KINDS
from subagents.runtime._services import Subscribers
from subagents.store.memory import MemoryStore
from subagents.supervision.effects import Publish

from .conftest import WAIT, Events

pytestmark = pytest.mark.usefixtures("no_new_threads")


class _Quiet(pykka.ThreadingActor):
    """A supervisor that is told nothing here (the effector needs one to start)."""


def _event(kind: EventKind, run_id: str = "r") -> Event:
    return Event(kind=kind, run_id=run_id, agent="a", root_run_id=run_id)


def test_a_subscriber_of_some_kinds_is_called_for_those_only_and_others_for_all() -> None:
    subscribers = Subscribers()
    every: list[EventKind] = []
    ends: list[EventKind] = []
    subscribers.subscribe(lambda e: every.append(e.kind))
    unsubscribe = subscribers.subscribe(lambda e: ends.append(e.kind), END_KINDS)
    kinds = [EventKind.SPAWNED, EventKind.STARTED, EventKind.FAILED, EventKind.COMPLETED]
    for kind in kinds:
        subscribers.publish(_event(kind))
    assert every == kinds
    assert ends == [EventKind.FAILED, EventKind.COMPLETED]
    unsubscribe()
    subscribers.publish(_event(EventKind.CANCELLED))
    assert ends == [EventKind.FAILED, EventKind.COMPLETED]
    assert every[-1] is EventKind.CANCELLED


def test_a_trivial_runs_three_events_reach_a_subscriber_and_its_end_wakes_a_waiter() -> None:
    """With real actors: a subscriber sees spawned, started, completed in order; a caller
    waiting on the run (``wait_all``: ``Endings``, subscribed to ends only) is woken by its
    end."""

    def trivial(ctx: AgentContext) -> str:
        return ctx.task

    rt = Runtime([trivial], store=MemoryStore())
    try:
        seen = Events()
        rt.subscribe(seen)
        handle = rt.spawn("trivial", "hello")
        [outcome] = rt.wait_all([handle], timeout=WAIT)
        assert outcome.status is RunStatus.COMPLETED and outcome.result == "hello"
        seen.wait_count(EventKind.COMPLETED, "trivial", 1)
        mine = [e.kind for e in seen.snapshot() if e.run_id == outcome.run_id]
        assert mine == [EventKind.SPAWNED, EventKind.STARTED, EventKind.COMPLETED]
    finally:
        rt.close()


def test_a_program_subscribes_to_some_kinds_through_the_runtime_and_gets_only_those() -> None:
    """``Runtime.subscribe(callback, kinds)``: the public way to take only some events (a
    benchmark counting ``parked`` ones, a program waiting for ends) without being called for
    every other; a bad ``kinds`` is refused there too, naming it."""

    def trivial(ctx: AgentContext) -> str:
        return ctx.task

    with Runtime([trivial], store=MemoryStore()) as rt:
        ends, every = Events(), Events()
        rt.subscribe(ends, {EventKind.COMPLETED})
        rt.subscribe(every)
        outcome = rt.spawn("trivial", "hello").result(timeout=WAIT)
        every.wait_count(EventKind.COMPLETED, "trivial", 1)
        ends.wait_count(EventKind.COMPLETED, "trivial", 1)
        assert [e.kind for e in every.snapshot() if e.run_id == outcome.run_id] == [
            EventKind.SPAWNED,
            EventKind.STARTED,
            EventKind.COMPLETED,
        ]
        assert [(e.kind, e.run_id) for e in ends.snapshot()] == [
            (EventKind.COMPLETED, outcome.run_id)
        ]
        with pytest.raises(ValueError, match="'finished': no such EventKind"):
            rt.subscribe(ends, {"finished"})  # type: ignore[arg-type]


def test_kinds_that_are_not_a_set_of_event_kinds_are_refused_naming_what_was_wrong() -> None:
    """One kind given alone is a str (``EventKind`` is a ``StrEnum``): ``in`` would test a
    substring, and a subscriber of ``restarted`` would be called for ``started`` too. It,
    and a name that is no kind of event, are refused when subscribing, not filtered wrong
    for ever after; a set of kinds is copied (a later change to it changes nothing)."""
    subscribers = Subscribers()
    with pytest.raises(TypeError, match="a set of EventKind"):
        subscribers.subscribe(lambda e: None, EventKind.RESTARTED)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="a set of EventKind"):
        subscribers.subscribe(lambda e: None, "completed")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'finished': no such EventKind"):
        subscribers.subscribe(lambda e: None, {EventKind.COMPLETED, "finished"})  # type: ignore[arg-type]
    got: list[EventKind] = []
    kinds = {EventKind.RESTARTED}
    subscribers.subscribe(lambda e: got.append(e.kind), kinds)
    kinds.add(EventKind.STARTED)
    subscribers.publish(_event(EventKind.STARTED))
    subscribers.publish(_event(EventKind.RESTARTED))
    assert got == [EventKind.RESTARTED]


def test_subscribers_want_a_kind_while_a_callback_takes_it_or_the_debug_log_is_on() -> None:
    """``Subscribers.wants``: what decides whether a straight mail's events are published
    (``Recorded.published``): no callback of that kind and no debug log, nobody."""
    subscribers = Subscribers()
    saved = structlog.get_config()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.INFO))
    try:
        assert not subscribers.wants(EventKind.MAIL_SENT)
        subscribers.subscribe(lambda e: None, END_KINDS)
        assert not subscribers.wants(EventKind.MAIL_SENT)
        assert subscribers.wants(EventKind.COMPLETED)
        unsubscribe = subscribers.subscribe(lambda e: None)
        assert subscribers.wants(EventKind.MAIL_SENT)
        unsubscribe()
        assert not subscribers.wants(EventKind.MAIL_DELIVERED)
        structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG))
        assert subscribers.wants(EventKind.MAIL_DELIVERED)  # logged at debug: published
    finally:
        structlog.configure(**saved)


def test_straight_mail_nobody_subscribed_to_keeps_its_events_and_a_subscriber_gets_them() -> None:
    """In memory, with no subscriber of mail events, a straight mail's events are still
    kept by the store (what ``store.events`` and the CLI read); a subscriber added later is
    handed those of the mail sent after it, each mail's ``mail_sent`` then ``mail_delivered``."""

    async def receiver(ctx: AgentContext) -> str:
        mail = await ctx.receive(timeout=WAIT)
        assert mail is not None
        await ctx.send(ctx.task, mail.content)  # to its parent: it ends after the reply
        return "read"

    async def sender(ctx: AgentContext) -> str:
        await ctx.send(ctx.task, "hello")  # by run id: straight to it
        return "sent"

    async def root(ctx: AgentContext) -> str:
        receiver_id: str = await ctx.spawn("receiver", ctx.run_id, background=True)
        await ctx.spawn("sender", receiver_id)  # one tree: its mail may go straight
        reply = await ctx.receive(timeout=WAIT)
        assert reply is not None and reply.content == "hello"
        return receiver_id

    def exchange(rt: Runtime) -> tuple[str, str, str]:
        done = rt.spawn("root", "go").result(timeout=WAIT)
        (sent,) = rt.store.list_runs(root_run_id=done.run_id, agent="sender")
        return done.run_id, sent.run_id, done.result

    def mail_events(events: list[Event], pair: tuple[str, str, str]) -> list[tuple[EventKind, str]]:
        """The events of the mail ``pair`` names (its sender, its recipient, its id)."""
        mail_id = pair[2]
        return [
            (e.kind, e.run_id)
            for e in events
            if e.kind in (EventKind.MAIL_SENT, EventKind.MAIL_DELIVERED)
            and e.data.get("mail_id") == mail_id
        ]

    def hello(rt: Runtime, sender: str, recipient: str) -> tuple[str, str, str]:
        """The "hello" ``sender`` mailed ``recipient`` (the receiver also mails its root
        its end, a dead letter: the root ended)."""
        mails = rt.store.mail_for(recipient)
        (mail,) = [
            m for m in mails if (m.sender, m.recipient, m.content) == (sender, recipient, "hello")
        ]
        return sender, recipient, mail.mail_id

    def kept(rt: Runtime, pair: tuple[str, str, str]) -> list[tuple[EventKind, str]]:
        return mail_events(rt.store.events(pair[0]) + rt.store.events(pair[1]), pair)

    agents = {"root": root, "sender": sender, "receiver": receiver}
    with Runtime(agents, store=MemoryStore()) as rt:
        _, sent_id, receiver_id = exchange(rt)
        first = hello(rt, sent_id, receiver_id)
        assert kept(rt, first) == [
            (EventKind.MAIL_SENT, sent_id),
            (EventKind.MAIL_DELIVERED, receiver_id),
        ]
        seen = Events()
        rt.subscribe(seen)
        root_id, sent_id, receiver_id = exchange(rt)
        # the reply too: it comes in the late line with the receiver's journal, decided by
        # ``Recorded.all`` (the sender's mail, before its end, is decided alone): its events
        # reach the subscriber only through ``Subscribers.wants``; decided before the
        # receiver's end (a run's reports in order), so published before it
        ended = {root_id, receiver_id}
        seen.wait_for(
            lambda items: ended <= {e.run_id for e in items if e.kind is EventKind.COMPLETED}
        )
        then, reply = hello(rt, sent_id, receiver_id), hello(rt, receiver_id, root_id)
        for pair in (then, reply):
            assert mail_events(seen.snapshot(), pair) == [
                (EventKind.MAIL_SENT, pair[0]),
                (EventKind.MAIL_DELIVERED, pair[1]),
            ]
            assert kept(rt, pair) == mail_events(seen.snapshot(), pair)


def test_subscribers_of_many_threads_at_once_are_all_called_in_the_order_they_came() -> None:
    """Callbacks subscribed from several threads at once (each building the callbacks and
    the per-kind table ``publish`` reads): none is lost, every one is handed an event of
    its kind once; one unsubscribed is not, and the rest keep their order. The switch
    interval made tiny so that the threads interleave inside a subscribe."""
    subscribers = Subscribers()
    got: list[tuple[int, int]] = []
    threads_n, each = 4, 300
    start = threading.Barrier(threads_n)
    unsubscribes: dict[tuple[int, int], Callable[[], None]] = {}

    def subscribe_many(t: int) -> None:
        start.wait(timeout=WAIT)
        for i in range(each):
            kinds = None if i % 2 else END_KINDS
            callback = functools.partial(lambda key, _e: got.append(key), (t, i))
            unsubscribes[(t, i)] = subscribers.subscribe(callback, kinds)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        workers = [threading.Thread(target=subscribe_many, args=(t,)) for t in range(threads_n)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(timeout=WAIT)
    finally:
        sys.setswitchinterval(interval)
    subscribers.publish(_event(EventKind.COMPLETED))
    assert sorted(got) == [(t, i) for t in range(threads_n) for i in range(each)]
    for t in range(threads_n):  # each thread's in the order it subscribed them
        assert [i for tt, i in got if tt == t] == list(range(each))
    got.clear()
    subscribers.publish(_event(EventKind.STARTED))  # the ends' subscribers are not called
    assert sorted(got) == [(t, i) for t in range(threads_n) for i in range(1, each, 2)]
    unsubscribes[(0, 1)]()
    got.clear()
    subscribers.publish(_event(EventKind.STARTED))
    assert (0, 1) not in got and len(got) == threads_n * each // 2 - 1


def test_the_effector_hands_on_only_events_someone_takes_read_at_each_event() -> None:
    """``Effector(heard=Subscribers.heard)``: a decision's event of a kind no subscriber
    takes is not handed to ``publish`` at all (counted on the way); one of a kind taken
    is; a subscriber added by another's callback during the same ``apply`` is handed the
    events after it (the table is read at each event); with the debug log on, every event
    goes through (it is logged)."""
    subscribers = Subscribers()
    handed: list[EventKind] = []
    ends: list[EventKind] = []
    later: list[EventKind] = []

    def publish(event: Event) -> None:
        handed.append(event.kind)
        subscribers.publish(event)

    def on_end(event: Event) -> None:
        ends.append(event.kind)
        if event.kind is EventKind.FAILED:  # subscribes another, in the middle of an apply
            subscribers.subscribe(lambda e: later.append(e.kind), {EventKind.STARTED})

    subscribers.subscribe(on_end, END_KINDS)
    timer = TimerService()
    supervisor = _Quiet.start()
    saved = structlog.get_config()
    try:
        effector = Effector(
            supervisor=supervisor,
            timer=timer,
            behaviour_for=lambda spec: None,  # type: ignore[arg-type,return-value]
            on_outside=lambda message: None,
            on_event=publish,
            pool=None,
            heard=subscribers.heard,
        )
        structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.INFO))
        kinds = [EventKind.SPAWNED, EventKind.FAILED, EventKind.STARTED, EventKind.COMPLETED]
        effector.apply([Publish(_event(kind)) for kind in kinds])
        assert handed == [EventKind.FAILED, EventKind.STARTED, EventKind.COMPLETED]
        assert ends == [EventKind.FAILED, EventKind.COMPLETED]
        assert later == [EventKind.STARTED]
        handed.clear()
        structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG))
        effector.apply([Publish(_event(EventKind.SPAWNED)), Publish(_event(EventKind.QUEUED))])
        assert handed == [EventKind.SPAWNED, EventKind.QUEUED]  # logged at debug: handed
    finally:
        structlog.configure(**saved)
        supervisor.stop()
        timer.stop()
