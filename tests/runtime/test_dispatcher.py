"""PooledActor on a Dispatcher: pykka's guarantees without a thread per actor.

Real actors, real threads; every wait is on an event or a future, with a timeout.
"""

from __future__ import annotations

import gc
import threading
from pathlib import Path
from typing import Any

import pykka
import pytest
from pykka._envelope import Envelope

from polling import wait_until
from subagents.actors.agent import AgentActor
from subagents.actors.inbox import stop_message
from subagents.actors.latch_future import LatchFuture
from subagents.actors.pooled import Dispatcher, DispatcherCounts
from subagents.actors.pooled_actor import PooledActor
from subagents.actors.tally import Tally
from subagents.behaviour.function import AgentContext
from subagents.blocking import about_to_block, blocking
from subagents.definitions.spec import AgentSpec
from subagents.messages import Event, EventKind, RunStatus
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime
from subagents.supervision.limits import Limits

from .conftest import at_once

WAIT = 30.0


class Recorder(PooledActor):
    """Records what it is told, and whether two handlings ever overlapped."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[Any] = []
        self.inside = False
        self.overlaps = 0
        self.started = False
        self.early = 0

    def on_start(self) -> None:
        self.started = True

    def on_receive(self, message: Any) -> Any:
        if self.inside:
            self.overlaps += 1
        if not self.started:
            self.early += 1
        self.inside = True
        try:
            if message == "report":
                return (list(self.seen), self.overlaps, self.early)
            self.seen.append(message)
            return None
        finally:
            self.inside = False


@pytest.mark.usefixtures("tiny_switch_interval")
@pytest.mark.parametrize("told_by", ["ref", "mailbox", "both"])
def test_each_actor_sees_each_senders_messages_in_order_one_at_a_time(
    dispatcher: Dispatcher, told_by: str
) -> None:
    """Four senders put at once while each actor drains, finds its mailbox empty and lets
    its turn go (``Mailbox.unschedule_if_empty``): nothing is lost, nothing handled twice or
    two at a time. Told as pykka tells (``ActorRef.tell``: an envelope), as a mail delivered
    straight is (``Mailbox.tell``: the bare message), or each sender either way in turn."""
    actors = [Recorder.start(dispatcher=dispatcher) for _ in range(50)]
    senders, per_sender = 4, 200
    go = threading.Event()

    def send(sender: int) -> None:
        assert go.wait(WAIT)
        for seq in range(per_sender):
            bare = told_by == "mailbox" or (told_by == "both" and (sender + seq) % 2 == 0)
            for ref in actors:
                if bare:
                    ref.actor_inbox.tell((sender, seq))
                else:
                    ref.tell((sender, seq))

    at_once(send, senders, go)
    for ref in actors:
        seen, overlaps, early = ref.ask("report", timeout=WAIT)
        assert overlaps == 0
        assert early == 0  # on_start ran before the first message
        assert len(seen) == senders * per_sender
        for sender in range(senders):
            assert [seq for s, seq in seen if s == sender] == list(range(per_sender))
    for ref in actors:
        ref.stop(block=True, timeout=WAIT)


def test_a_flooded_actor_does_not_keep_the_only_thread() -> None:
    d = Dispatcher(size=1, stall_s=60.0, name="t-flood")  # no replacement: fairness alone
    try:
        gate = threading.Event()

        class Blocker(PooledActor):
            def on_receive(self, message: Any) -> Any:
                assert gate.wait(WAIT)

        handled = [0]

        class Counter(PooledActor):
            def on_receive(self, message: Any) -> Any:
                handled[0] += 1

        blocker = Blocker.start(dispatcher=d)
        flooded = Counter.start(dispatcher=d)
        blocker.tell("hold")  # the only thread is held while the flood is queued
        flood = 5_000
        for _ in range(flood):
            flooded.tell("one")
        seen_at: list[int] = []
        done = threading.Event()

        class Probe(PooledActor):
            def on_receive(self, message: Any) -> Any:
                seen_at.append(handled[0])
                done.set()

        probe = Probe.start(dispatcher=d)
        probe.tell("now")
        gate.set()
        assert done.wait(WAIT)
        # the probe, in line behind the flood, ran while the flood was still being handled
        assert 0 < seen_at[0] < flood
        flooded.ask("last", timeout=WAIT)
        assert handled[0] == flood + 1
        for ref in (blocker, flooded, probe):
            ref.stop(block=True, timeout=WAIT)
    finally:
        assert d.close(WAIT) == []


NEVER = 3600.0
"""A ``stall_s`` the watch thread never reaches in a test: only ``about_to_block`` replaces."""


@pytest.mark.parametrize("found_by", ["the watch thread", "about_to_block"])
def test_a_blocked_handling_does_not_starve_the_other_actors(found_by: str) -> None:
    """The only thread's handling blocks: another thread takes work in its place, found by
    the watch thread after ``stall_s``, or at once when the handling says it blocks (then
    the watch thread never looks)."""
    says = found_by == "about_to_block"
    d = Dispatcher(size=1, stall_s=NEVER if says else 0.02, name="t-block")
    try:
        entered, release = threading.Event(), threading.Event()

        class Blocking(PooledActor):
            def on_receive(self, message: Any) -> Any:
                if says:
                    about_to_block()
                entered.set()
                assert release.wait(WAIT)  # a plain def tool, a sync function agent...
                return "released"

        class Echo(PooledActor):
            def on_receive(self, message: Any) -> Any:
                return message

        blocking = Blocking.start(dispatcher=d)
        later = blocking.ask("block", block=False)
        assert entered.wait(WAIT)
        echoes = [Echo.start(dispatcher=d) for _ in range(20)]
        assert [e.ask(i, timeout=WAIT) for i, e in enumerate(echoes)] == list(range(20))
        if says:
            assert d.counts() == DispatcherCounts(working=1, replaced=1)
        else:
            assert d.counts().replaced >= 1  # the blocked one (a slow drain under load too)
        release.set()
        assert later.get(timeout=WAIT) == "released"
        for ref in [blocking, *echoes]:
            ref.stop(block=True, timeout=WAIT)
        if says:  # one left, not two: the thread back from the block leaves once idle
            assert d.wait_idle(WAIT)  # for ``LINGER_S`` (it may take work till then)
            wait_until(
                lambda: d.counts() == DispatcherCounts(working=1, replaced=0), "one thread left"
            )
    finally:
        assert d.close(WAIT) == []
    about_to_block()  # on a thread no pool hooked: nothing happens


def test_work_that_says_it_blocks_and_does_not_costs_no_thread() -> None:
    """``about_to_block`` counts the thread as blocked at once, but its replacement starts
    only when work finds no thread to take it: a sync function agent that returns at once
    (``blocking()`` around it, as ``FunctionBehaviour`` does) hands no work to another
    thread, and its own thread takes its place back when the block is over."""
    d = Dispatcher(size=1, stall_s=NEVER, name="t-noblock")
    try:

        class SaysItBlocks(PooledActor):
            def on_receive(self, message: Any) -> Any:
                with blocking():  # ... and then does not block
                    return message

        ref = SaysItBlocks.start(dispatcher=d)  # (no other work waits for a thread)
        assert [ref.ask(i, timeout=WAIT) for i in range(20)] == list(range(20))
        assert d.wait_idle(WAIT)
        # one dispatcher thread and the watch thread: no replacement was ever started
        assert len(d.threads()) == 2, [t.name for t in d.threads()]
        ref.stop(block=True, timeout=WAIT)
    finally:
        assert d.close(WAIT) == []


def _without_the_watch(rt: Runtime) -> None:
    """Only ``about_to_block`` can replace the runtime's dispatcher threads from now on (the
    dispatcher starts its watch thread at its first actor, with this ``stall_s``)."""
    dispatcher = rt._hosting.dispatcher
    assert dispatcher is not None and not dispatcher.threads()
    dispatcher.stall_s = NEVER


@pytest.mark.parametrize("kind", ["function", "tool"])
def test_sync_function_agents_and_tools_block_without_starving_the_dispatcher(kind: str) -> None:
    """More runs than dispatcher threads, each blocked until all of them are: they all get
    there only because a sync function agent, and a tool call, say that they block."""
    n = 12  # dispatcher threads: default_size() = max(4, 2 per core)
    barrier = threading.Barrier(n)

    def gather() -> str:
        barrier.wait(WAIT)
        return "all here"

    def together(ctx: AgentContext) -> str:  # a sync function agent
        return gather()

    def meet() -> str:
        """Wait until every run is in this tool."""
        return gather()

    lead = AgentSpec(name="lead", description="calls meet", tools=("meet",))
    model = ScriptedModel(
        {"lead": [{"tool_calls": [{"name": "meet", "input": {}}]}, {"text": "{result0}"}]}
    )
    agents: list[Any] = [together] if kind == "function" else [lead]
    limits = Limits(max_concurrency=n, per_agent=n)
    with Runtime(agents, model=model, tools=[meet], limits=limits) as rt:
        _without_the_watch(rt)
        name = "together" if kind == "function" else "lead"
        handles = [rt.spawn(name, str(i)) for i in range(n)]
        outcomes = [h.result(timeout=WAIT * 2) for h in handles]
    assert [o.status for o in outcomes] == [RunStatus.COMPLETED] * n, outcomes[0]
    assert {o.result for o in outcomes} == {"all here"}


def test_stop_answers_the_asks_left_and_refuses_later_ones(dispatcher: Dispatcher) -> None:
    gate, stopped = threading.Event(), threading.Event()

    class Slow(PooledActor):
        def on_receive(self, message: Any) -> Any:
            assert gate.wait(WAIT)
            return message

        def on_stop(self) -> None:
            stopped.set()

    ref = Slow.start(dispatcher=dispatcher)
    first = ref.ask("first", block=False)
    stopping = ref.stop(block=False)
    behind = ref.ask("behind the stop", block=False)
    gate.set()
    assert first.get(timeout=WAIT) == "first"
    assert stopping.get(timeout=WAIT) is True
    assert stopped.wait(WAIT)
    with pytest.raises(pykka.ActorDeadError):
        behind.get(timeout=WAIT)
    with pytest.raises(pykka.ActorDeadError):
        ref.ask("after", timeout=WAIT)
    assert not ref.is_alive()


def test_a_put_that_raced_the_stop_is_refused_after_the_mailbox_let_its_actor_go(
    dispatcher: Dispatcher,
) -> None:
    """Once a stopped actor's last drain is over, its mailbox lets the actor go (no cycle
    between them: the actor is freed without the cyclic GC). A message put after that, by
    a sender that passed ``ActorRef``'s ``is_alive`` check before the stop, is answered as
    pykka's teardown answers: an ask ``ActorDeadError``, a stop's ask None; a tell dropped."""
    ref = Recorder.start(dispatcher=dispatcher)
    actor = ref._actor_weakref  # (pykka's ref holds its actor weakly)
    ref.stop(timeout=WAIT)
    assert dispatcher.wait_idle(WAIT)
    gc.disable()  # only reference counting frees it now
    try:
        assert actor() is None  # nothing holds it any more: no cycle with its mailbox
    finally:
        gc.enable()
    asked: pykka.Future[Any] = LatchFuture()
    stopping: pykka.Future[Any] = LatchFuture()
    ref.actor_inbox.put(Envelope("told"))  # as a racing sender puts, past the check
    ref.actor_inbox.tell("told bare")  # as a mail delivered straight is (no check): dropped
    ref.actor_inbox.put(Envelope("asked", reply_to=asked))
    ref.actor_inbox.put(Envelope(stop_message(), reply_to=stopping))
    with pytest.raises(pykka.ActorDeadError, match=r"Recorder .* stopped before handling"):
        asked.get(timeout=WAIT)
    assert stopping.get(timeout=WAIT) is None
    assert ref.actor_inbox.empty()


@pytest.mark.parametrize("told_bare", [False, True])
def test_a_failing_tell_stops_the_actor_and_a_failing_ask_answers_the_error(
    dispatcher: Dispatcher, told_bare: bool
) -> None:
    failed = threading.Event()

    class Fragile(PooledActor):
        def on_receive(self, message: Any) -> Any:
            raise ValueError(f"bad {message}")

        def on_failure(self, *exc_info: Any) -> None:
            failed.set()

    ref = Fragile.start(dispatcher=dispatcher)
    with pytest.raises(ValueError, match="bad asked"):
        ref.ask("asked", timeout=WAIT)
    assert ref.is_alive()
    if told_bare:  # as a mail delivered straight is told (``Mailbox.tell``)
        ref.actor_inbox.tell("told")
    else:
        ref.tell("told")
    assert failed.wait(WAIT)
    assert not ref.is_alive()


def test_an_on_start_that_raises_stops_its_actor_alone_and_refuses_its_asks(
    dispatcher: Dispatcher,
) -> None:
    """As pykka's ``_actor_loop_setup`` (which ``_drain`` runs without its frame): an
    ``on_start`` that raises stops its actor (``on_stop`` not called), uncounted, and every
    ask of it is refused ``ActorDeadError`` (put before the stop, after it, or after its
    mailbox let it go); the dispatcher's threads go on with other actors."""
    stopped = threading.Event()

    class Broken(PooledActor):
        def on_start(self) -> None:
            raise RuntimeError("cannot start")

        def on_stop(self) -> None:
            stopped.set()

    ref = Broken.start(dispatcher=dispatcher)
    with pytest.raises(pykka.ActorDeadError):
        ref.ask("first", timeout=WAIT)
    assert dispatcher.wait_idle(WAIT)
    with pytest.raises(pykka.ActorDeadError):
        ref.ask("after", timeout=WAIT)
    assert not ref.is_alive() and not stopped.is_set()
    assert dispatcher.live == 0
    other = Recorder.start(dispatcher=dispatcher)
    other.tell("a")
    assert other.ask("report", timeout=WAIT) == (["a"], 0, 0)
    other.stop(timeout=WAIT)
    assert dispatcher.live == 0


def test_live_and_stopped_count_every_actor_started_and_stopped_from_many_threads(
    dispatcher: Dispatcher,
) -> None:
    """The counts take no lock (``actors/tally.py``): four threads start 300 actors each
    while the dispatcher's threads stop the ones started, the watch thread folding the
    counts meanwhile; none is lost. (An actor's stop is counted before its stop's ask is
    answered: after the answers, the counts are exact.)"""
    per_thread, starters = 300, 4
    refs: list[list[pykka.ActorRef[Recorder]]] = [[] for _ in range(starters)]
    go = threading.Barrier(starters)
    stops: list[list[pykka.Future[Any]]] = [[] for _ in range(starters)]

    def start(me: int) -> None:
        go.wait(WAIT)
        for i in range(per_thread):
            ref = Recorder.start(dispatcher=dispatcher)
            refs[me].append(ref)
            if i % 2:  # every other one stopped at once, while the others start
                stops[me].append(ref.stop(block=False))

    threads = [threading.Thread(target=start, args=(i,)) for i in range(starters)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
    assert not any(t.is_alive() for t in threads)
    for future in [f for mine in stops for f in mine]:
        future.get(timeout=WAIT)
    total = per_thread * starters
    assert dispatcher.stopped == total // 2
    assert dispatcher.live == total - total // 2
    for ref in [r for mine in refs for r in mine if r.is_alive()]:
        ref.stop(block=True, timeout=WAIT)
    assert dispatcher.stopped == total
    assert dispatcher.live == 0


class _StartsWithAStartAndStopAfterItsRead(Tally):
    """The started count of a dispatcher whose first read is followed, before the caller
    goes on, by an actor's start and its stop (what another thread may do at that point)."""

    def __init__(self, dispatcher: Dispatcher) -> None:
        super().__init__()
        self.dispatcher: Dispatcher | None = dispatcher

    @property
    def value(self) -> int:
        read = Tally.value.fget(self)  # type: ignore[attr-defined]
        dispatcher, self.dispatcher = self.dispatcher, None
        if dispatcher is not None:
            dispatcher._actor_started()
            dispatcher._actor_stopped()
        return int(read)


def test_live_is_never_negative_when_an_actor_starts_and_stops_while_it_is_read() -> None:
    """``live`` is two lock-free reads (stopped, started): an actor started and stopped
    between them must not make it negative. It reads the stops first (every stop it counts
    had its start counted before); the other order reads -1 here (the start missed, its
    stop counted), and the GC's pacing and the spares' count would read it."""
    d = Dispatcher(size=1, name="t-live-order")
    try:
        d._starts = _StartsWithAStartAndStopAfterItsRead(d)
        assert d.live == 0  # (the start and stop came after its reads, or between them)
        assert d.live == 0
        assert d.stopped == 1
    finally:
        d.close(WAIT)


def test_start_needs_a_dispatcher() -> None:
    with pytest.raises(TypeError, match="dispatcher"):
        Recorder.start()


def test_idle_actors_hold_no_thread_and_closing_joins_every_thread() -> None:
    """(Its actors stopped and its dispatcher closed whatever fails: 3,000 live runs are past
    the GC pacing's threshold, and a dispatcher left open kept them counted, so the pacing
    frozen, for every later test of the worker.)"""
    before = set(threading.enumerate())
    d = Dispatcher(size=3, stall_s=0.02, name="t-idle")
    refs: list[Any] = []
    try:
        refs = [Recorder.start(dispatcher=d) for _ in range(3_000)]
        for ref in refs:
            ref.tell("hello")
        assert all(ref.ask("report", timeout=WAIT)[0] == ["hello"] for ref in refs)
        assert d.wait_idle(WAIT)
        extra = [t for t in threading.enumerate() if t not in before]
        # however many actors there are: the dispatcher's working threads, at most as many
        # parked (threads replaced while a drain was slow, kept for the next replacement)
        # and its watch thread
        assert len(extra) <= 2 * d.size + 1, [t.name for t in extra]
        for ref in refs:
            ref.stop(block=False)
        assert d.close(WAIT) == []
        assert not [t for t in threading.enumerate() if t not in before and t.is_alive()]
    finally:
        for ref in refs:
            ref.stop(block=False)
        d.close(WAIT)  # (nothing more where it closed above)


def _threads_in_process() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise AssertionError("no Threads: line in /proc/self/status")


def test_two_thousand_waiting_runs_hold_no_threads() -> None:
    """The runtime's claim: a waiting run costs its objects, not a thread."""
    n = 2_000

    async def idle(ctx: AgentContext) -> str:
        mail = await ctx.receive(timeout=600)
        return "mail" if mail is not None else "none"

    waiting = threading.Event()
    count = [0]
    lock = threading.Lock()

    def on_event(event: Event) -> None:
        if event.kind is EventKind.WAITING:
            with lock:
                count[0] += 1
                if count[0] == n:
                    waiting.set()

    limits = Limits(
        max_concurrency=n, per_agent=n, queue_bound=n, timeout_s=900.0, max_timeout_s=900.0
    )
    before_os = _threads_in_process()
    with Runtime([idle], limits=limits, agent_threads="shared") as rt:
        rt.subscribe(on_event)
        handles = [rt.spawn("idle", str(i)) for i in range(n)]
        assert waiting.wait(120), f"{count[0]} of {n} runs waiting"
        dispatcher = rt._hosting.dispatcher
        assert dispatcher is not None
        assert dispatcher.wait_idle(WAIT)
        held = _threads_in_process() - before_os
        # the runtime's own threads (supervisor, registry, timer, lease, dispatcher) and
        # the dispatcher's: a few dozen at most, never one per run
        assert held <= 40 + dispatcher.counts().replaced, held
        assert len(threading.enumerate()) < n // 10
        # and they still answer: mail one of them, it ends
        rt.send(handles[0].run_id, "wake up")
        assert handles[0].result(timeout=WAIT).result == "mail"


def test_own_threads_is_still_an_option_and_a_bad_value_is_named() -> None:
    async def idle(ctx: AgentContext) -> str:
        mail = await ctx.receive(timeout=600)
        return mail.content if mail is not None else "none"

    waiting = threading.Event()

    def on_event(event: Event) -> None:
        if event.kind is EventKind.WAITING:
            waiting.set()

    with Runtime([idle], agent_threads="own") as rt:
        assert rt._hosting.dispatcher is None
        rt.subscribe(on_event)
        before = {t.name for t in threading.enumerate()}
        handle = rt.spawn("idle", "wait")
        assert waiting.wait(WAIT)
        # the waiting run's loop holds a pooled thread of its own
        assert rt._hosting.pool.threads == 1
        assert {t.name for t in threading.enumerate()} - before
        rt.send(handle.run_id, "hello")
        assert handle.result(timeout=WAIT).result == "hello"
    with pytest.raises(ValueError, match="agent_threads must be one of shared, own, not 'many'"):
        Runtime([idle], agent_threads="many")


@pytest.mark.parametrize("agent_threads", ["shared", "own"])
def test_close_ends_every_waiting_run_and_stops_every_actor(agent_threads: str) -> None:
    """Closing stops all the waiting runs at once (no stop waited for one by one): each is
    cancelled exactly once, and no agent actor is left alive."""
    n = 200

    async def idle(ctx: AgentContext) -> str:
        mail = await ctx.receive(timeout=600)
        return "mail" if mail is not None else "none"

    waiting = threading.Event()
    ended: list[str] = []
    count = [0]
    lock = threading.Lock()

    def on_event(event: Event) -> None:
        with lock:
            if event.kind is EventKind.WAITING:
                count[0] += 1
                if count[0] == n:
                    waiting.set()
            elif event.kind in (EventKind.CANCELLED, EventKind.COMPLETED, EventKind.FAILED):
                ended.append(event.run_id)

    limits = Limits(max_concurrency=n, per_agent=n, queue_bound=n)
    rt = Runtime([idle], limits=limits, agent_threads=agent_threads)
    rt.subscribe(on_event)
    others = {ref.actor_urn for ref in pykka.ActorRegistry.get_by_class(AgentActor)}
    handles = [rt.spawn("idle", str(i)) for i in range(n)]
    assert waiting.wait(120), f"{count[0]} of {n} runs waiting"
    dispatcher = rt._hosting.dispatcher
    # this runtime's agent actors: a dispatcher counts its own (they are not in pykka's
    # registry); an actor on its own thread is in the registry until it stops
    ours = [r for r in pykka.ActorRegistry.get_by_class(AgentActor) if r.actor_urn not in others]
    assert (dispatcher.live if dispatcher is not None else len(ours)) == n
    rt.close(timeout=WAIT)
    assert sorted(ended) == sorted(h.run_id for h in handles)  # each cancelled once
    assert all(h.result(timeout=WAIT).status == "cancelled" for h in handles)
    assert [ref for ref in ours if ref.is_alive()] == []
    assert dispatcher is None or dispatcher.live == 0
