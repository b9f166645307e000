"""Threads started ahead (``ThreadPool.add_spare``, ``Dispatcher._add_spares``): a handling
that says it blocks, and the supervisor handing out work, never wait for a new thread to
start (``Thread.start`` waits until the new thread runs: behind a busy GIL, milliseconds,
once per early model call of a fan-out). A replacement goes to a parked thread; with none
parked, the dispatcher's watch thread starts it, and spares, parked, for the next ones.

Real threads; every wait is on an event or a semaphore, with a timeout."""

from __future__ import annotations

import inspect
import sys
import threading
from typing import Any

import pytest

from polling import wait_until
from subagents.actors.pooled import Dispatcher, DispatcherCounts
from subagents.actors.pooled_actor import PooledActor
from subagents.actors.threads import PoolClosed, ThreadPool
from subagents.behaviour.function import AgentContext
from subagents.behaviour.llm_factory import LLMFactory
from subagents.blocking import about_to_block
from subagents.definitions.spec import AgentSpec
from subagents.messages import (
    ChatMessage,
    Checkpoint,
    ModelRequest,
    ModelResponse,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from subagents.runtime import RunHandle, Runtime
from subagents.supervision.limits import Limits

from .conftest import WAIT

NEVER = 3600.0
"""A watch thread that never looks for stalled drains on its own: only pokes wake it."""


def test_a_spare_thread_is_started_parked_and_taken_without_a_start() -> None:
    pool = ThreadPool(name="t-spare", max_idle=2)
    try:
        ran = threading.Event()
        assert not pool.try_run(ran.set)  # nothing parked: nothing run, no thread started
        assert pool.threads == 0 and not ran.is_set()
        assert pool.add_spare() and pool.add_spare()
        assert not pool.add_spare()  # parked and coming at max_idle
        assert pool.spares == 2
        wait_until(lambda: pool.parked == 2, "two spares parked")
        assert pool.try_run(ran.set)
        assert ran.wait(WAIT)
        assert pool.threads == 2  # the job went to a spare: no thread started for it
    finally:
        assert pool.close(WAIT) == []
    assert not pool.add_spare()
    with pytest.raises(PoolClosed):
        pool.try_run(ran.set)


def test_handlings_that_block_never_start_a_thread_themselves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """n handlings that say they block while work waits: each is replaced, every thread
    is started by the watch thread: none by a blocked handling's thread, none by the
    caller handing out work (after the dispatcher's own start)."""
    starters: list[str] = []
    start = threading.Thread.start

    def recorded(thread: threading.Thread) -> None:
        starters.append(threading.current_thread().name)
        start(thread)

    d = Dispatcher(size=1, stall_s=NEVER, name="t-ahead")
    n = 8
    entered, release = threading.Semaphore(0), threading.Event()

    class Blocking(PooledActor):
        def on_receive(self, message: Any) -> Any:
            about_to_block()  # a model call's wait, say
            entered.release()
            assert release.wait(WAIT)
            return message

    try:
        first = Blocking.start(dispatcher=d)  # the dispatcher's own start: its size, watch
        monkeypatch.setattr(threading.Thread, "start", recorded)
        refs = [first, *(Blocking.start(dispatcher=d) for _ in range(n - 1))]
        answers = [ref.ask(i, block=False) for i, ref in enumerate(refs)]
        for _ in range(n):  # all blocked at once: each had a thread
            assert entered.acquire(timeout=WAIT)
        assert starters, "no thread was started for the replacements"
        assert set(starters) == {"t-ahead-watch"}, starters
        release.set()
        assert [a.get(timeout=WAIT) for a in answers] == list(range(n))
        for ref in refs:
            ref.stop(block=True, timeout=WAIT)
    finally:
        release.set()
        monkeypatch.undo()
        assert d.close(WAIT) == []


@pytest.mark.parametrize("says_it", [False, True], ids=["stalled", "about_to_block"])
def test_a_replacement_thread_is_started_with_the_dispatchers_lock_let_go(
    monkeypatch: pytest.MonkeyPatch, says_it: bool
) -> None:
    """The one thread of a dispatcher is held in a handling (found stalled by the watch
    thread, or said so) while another actor's message waits: a thread is started in its
    place, and at that start nobody holds the dispatcher's lock (``Thread.start`` waits
    until the new thread runs: under the lock, every handling that says it blocks and
    every drain's end waited behind it, ``_start_owed``)."""
    held_at_start: list[bool] = []
    start = threading.Thread.start
    d = Dispatcher(size=1, stall_s=0.02, name="t-lock-let-go")

    def recorded(thread: threading.Thread) -> None:
        free = d._lock.acquire(blocking=False)
        if free:
            d._lock.release()
        held_at_start.append(not free)
        start(thread)

    entered, release = threading.Event(), threading.Event()

    class Held(PooledActor):
        def on_receive(self, message: Any) -> Any:
            if message == "hold":
                if says_it:
                    about_to_block()
                entered.set()
                assert release.wait(WAIT)
            return message

    try:
        held, other = Held.start(dispatcher=d), Held.start(dispatcher=d)
        assert held.ask("warm", timeout=WAIT) == "warm"  # the dispatcher's own start done
        monkeypatch.setattr(threading.Thread, "start", recorded)
        holding = held.ask("hold", block=False)
        assert entered.wait(WAIT)
        assert other.ask("meanwhile", timeout=WAIT) == "meanwhile"  # on a new thread
        assert held_at_start, "no thread was started in the held one's place"
        assert held_at_start == [False] * len(held_at_start)
        release.set()
        assert holding.get(timeout=WAIT) == "hold"
        for ref in (held, other):
            ref.stop(block=True, timeout=WAIT)
    finally:
        release.set()
        monkeypatch.undo()
        assert d.close(WAIT) == []


def test_spares_are_never_more_than_the_live_actors_that_may_still_block() -> None:
    """Spares are started for handlings that may block next: the live actors not blocked
    now. With every live actor blocked, none (a fan-out of 100 calls at a time kept 100
    spares parked beside its 100 blocked threads: 200 threads started, not ~100); with two
    live and not blocked, two. (Enough threads that nobody waits for one: the watch thread
    is never poked, so what ``_add_spares`` starts is all there is.)"""
    n = 6
    d = Dispatcher(size=n + 2, stall_s=NEVER, name="t-spares")
    entered, release = threading.Semaphore(0), threading.Event()

    class Blocking(PooledActor):
        def on_receive(self, message: Any) -> Any:
            if message:
                about_to_block()
                entered.release()
                assert release.wait(WAIT)
            return message

    try:
        refs = [Blocking.start(dispatcher=d) for _ in range(n)]
        answers = [ref.ask(True, block=False) for ref in refs]
        for _ in range(n):
            assert entered.acquire(timeout=WAIT)
        assert d.counts().replaced == n
        threads = d._pool.threads
        d._add_spares(True)  # what a poked watch thread does
        assert d._pool.threads == threads  # every live actor blocked: none may block next
        idle = [Blocking.start(dispatcher=d) for _ in range(2)]  # live, not blocked
        assert [ref.ask(False, timeout=WAIT) for ref in idle] == [False, False]
        d._add_spares(True)
        assert d._pool.spares == 2, d._pool.spares
        release.set()
        assert all(a.get(timeout=WAIT) for a in answers)
        for ref in [*refs, *idle]:
            ref.stop(block=True, timeout=WAIT)
    finally:
        release.set()
        assert d.close(WAIT) == []


def test_ready_has_the_watch_thread_start_the_spares_asked_for() -> None:
    d = Dispatcher(size=1, stall_s=NEVER, name="t-ready")
    try:
        d.ready(3)
        assert d._pool.wait_until(lambda c: c.parked == 3, WAIT), d._pool.parked
        d.ready(2)  # enough parked already: none more
        d.ready(4)
        assert d._pool.wait_until(lambda c: c.parked == 4, WAIT), d._pool.parked
    finally:
        assert d.close(WAIT) == []
    assert d._pool.threads == 0


class _CountedEvent(threading.Event):
    """A ``threading.Event`` that counts its ``set`` calls (the dispatcher's poke)."""

    def __init__(self) -> None:
        super().__init__()
        self.sets = 0

    def set(self) -> None:
        self.sets += 1
        super().set()


def test_ready_covered_by_parked_spares_wakes_no_watch_thread() -> None:
    """A wave the parked spares already cover (a fan-out's freed slots handed to the next
    children, two or more in one decision) does not wake the watch thread: its look would
    start none. One they do not cover still does, and its spares are started."""
    d = Dispatcher(size=1, stall_s=NEVER, name="t-covered")
    pokes = _CountedEvent()
    d._poked = pokes  # (before the watch thread starts: it waits on this one)
    try:
        d.ready(3)
        assert d._pool.wait_until(lambda c: c.parked == 3, WAIT), d._pool.parked
        before = pokes.sets
        assert before >= 1
        d.ready(2)
        d.ready(3)
        assert pokes.sets == before  # covered: nobody woken
        d.ready(4)
        assert pokes.sets == before + 1
        assert d._pool.wait_until(lambda c: c.parked == 4, WAIT), d._pool.parked
    finally:
        assert d.close(WAIT) == []


class _HeldModel:
    """A model whose calls wait for the test's ``release`` (``announce``: saying first that
    they block, as a network call does)."""

    def __init__(self, announce: bool = True) -> None:
        self.announce = announce
        self.entered = threading.Semaphore(0)
        self.release = threading.Event()

    def complete(self, request: ModelRequest, **kwargs: Any) -> ModelResponse:
        if self.announce:
            about_to_block()
        self.entered.release()
        assert self.release.wait(WAIT)
        return ModelResponse(content=(TextBlock("done"),), stop_reason="end_turn")


async def _parent(ctx: AgentContext) -> str:
    count = int(ctx.task)
    outcomes = await ctx.gather(*[ctx.spawn("worker", str(i)) for i in range(count)])
    return ",".join(o.status for o in outcomes)


def _wave_runtime(n: int, model: _HeldModel) -> Runtime:
    worker = AgentSpec(name="worker", description="one model call", tools=())
    limits = Limits(max_concurrency=n + 1, per_agent=n, max_children=n, timeout_s=WAIT)
    return Runtime({"parent": _parent, "worker": worker}, model=model, limits=limits)


def test_a_wave_of_llm_starts_has_its_threads_started_ahead() -> None:
    """A step that starts n LLM runs at once has the dispatcher start n spares for their
    model calls before they block (``Effector._threads_for_starts``, ``Dispatcher.ready``),
    not one by one as each blocks (those starts waited for the GIL behind the wave: 13-45
    in the first 100 ms of a 1,000-child fan-out). Here the calls do not say they block,
    and the watch thread never looks for stalls: no replacement is ever owed, so the
    spares parked are the ones started ahead."""
    n = 10
    model = _HeldModel(announce=False)
    with _wave_runtime(n, model) as rt:
        dispatcher = rt._hosting.dispatcher
        assert dispatcher is not None
        dispatcher.stall_s = NEVER  # (started at the parent's start, with this stall_s)
        handle = rt.spawn("parent", str(n))
        pool = dispatcher._pool
        assert pool.wait_until(lambda c: c.parked >= n, WAIT), pool.parked
        model.release.set()
        assert handle.result(timeout=WAIT).result == ",".join(["completed"] * n)


def test_a_wave_of_model_calls_is_under_way_at_once() -> None:
    """Every call of a wave under way at once (the dispatcher's own threads are fewer):
    each had a thread, whether a spare started ahead or a replacement; and no more."""
    n = 12
    model = _HeldModel()
    with _wave_runtime(n, model) as rt:
        dispatcher = rt._hosting.dispatcher
        assert dispatcher is not None
        dispatcher.stall_s = NEVER
        handle = rt.spawn("parent", str(n))
        for _ in range(n):
            assert model.entered.acquire(timeout=WAIT)
        # and not many more threads than that: the dispatcher's own, one per call, one for
        # the parent (live, it might block next) (the spares asked for ahead are a number
        # started, not a level kept while the calls take them: that made 2n). Not exactly
        # that many: under load a call may say it blocks before the spare started for it
        # has parked, and a replacement starts beside it (seen once: n + 2 over the size)
        threads = dispatcher._pool.threads
        assert threads <= dispatcher.size + n + n // 2, threads
        model.release.set()
        assert handle.result(timeout=WAIT).result == ",".join(["completed"] * n)


def test_spares_asked_for_ahead_are_a_number_started_not_a_level_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``ready(n)`` starts n spares, however fast the wave's calls take them: kept as a
    level (n parked) while the calls took them, a fan-out of 100 started ~200 threads.
    Here each spare is taken as soon as it parks (its thread then held), as a wave does."""
    d = Dispatcher(size=1, stall_s=NEVER, name="t-ahead-n", spare=8)
    pool = d._pool
    hold = threading.Event()
    started: list[bool] = []
    add_spare = pool.add_spare

    def held() -> None:
        hold.wait(WAIT)

    def taken_at_once() -> bool:
        if len(started) == 10 or not add_spare():  # (a level kept would go on for ever)
            return False
        started.append(True)
        assert pool.wait_until(lambda c: c.parked >= 1, WAIT)
        assert pool.try_run(held)
        return True

    try:
        monkeypatch.setattr(pool, "add_spare", taken_at_once)
        with d._lock:
            d._ahead = 3  # what ``ready(3)`` asks of the watch thread's next look
        d._add_spares(False)
        assert len(started) == 3, len(started)
    finally:
        hold.set()
        monkeypatch.undo()
        assert d.close(WAIT) == []


def _refusing(monkeypatch: pytest.MonkeyPatch, refuse: Any) -> list[str]:
    """``Thread.start`` refused (the process's thread limit) where ``refuse(name)`` says, for
    the thread being started; the names of the threads it refused."""
    refused: list[str] = []
    start = threading.Thread.start

    def limited(thread: threading.Thread) -> None:
        if refuse(thread.name):
            refused.append(thread.name)
            raise RuntimeError("can't start new thread")
        start(thread)

    monkeypatch.setattr(threading.Thread, "start", limited)
    return refused


@pytest.mark.parametrize("refused_at", [1, 2, 3])
def test_a_dispatcher_whose_start_was_refused_a_thread_still_runs_its_work(
    monkeypatch: pytest.MonkeyPatch, refused_at: int
) -> None:
    """The process at its thread limit when the dispatcher starts (its first actor's start),
    for one thread: the k-th it starts (the watch thread or one of its own). The start does
    not raise into whoever sent the first message, the dispatcher is not left without a
    watch thread or with fewer threads for ever: the thread it could not have is started
    again later, and a handling that blocks still gets a replacement. (A refused start left
    ``_started`` set with no watch thread: every handling that blocked stayed unreplaced,
    the mail behind it waited for ever; and the first actor's start raised.)"""
    d = Dispatcher(size=2, stall_s=0.05, name="t-refused")
    seen = 0

    def kth(name: str) -> bool:
        nonlocal seen
        if not name.startswith("t-refused"):
            return False
        seen += 1
        return seen == refused_at

    entered, release = threading.Semaphore(0), threading.Event()

    class Blocking(PooledActor):
        def on_receive(self, message: Any) -> Any:
            if message == "block":
                about_to_block()
                entered.release()
                assert release.wait(WAIT)
            return message

    refused = _refusing(monkeypatch, kth)
    try:
        refs = [Blocking.start(dispatcher=d) for _ in range(4)]
        assert refused, "no thread start was refused"
        blocked = [ref.ask("block", block=False) for ref in refs[:3]]  # more than its size
        for _ in range(3):
            assert entered.acquire(timeout=WAIT)
        assert refs[3].ask("free", timeout=WAIT) == "free"  # a thread for it all the same
        release.set()
        assert [f.get(timeout=WAIT) for f in blocked] == ["block"] * 3
        for ref in refs:
            ref.stop(block=True, timeout=WAIT)
    finally:
        release.set()
        monkeypatch.undo()
        assert d.close(WAIT) == []


def test_a_wave_whose_dispatcher_start_was_refused_a_thread_still_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first decision of a runtime starts two LLM runs (``spawn_many``): its effector
    asks the dispatcher for their threads ahead (``ready``), which starts the dispatcher,
    on the supervisor's thread, at the process's thread limit for one thread. The
    decision's effects are all carried out all the same (``Effector.apply``: one that fails
    is logged, the rest go on) and both runs complete: before, ``ready`` raised out of
    ``apply`` before any effect (no run started, no deadline armed: the handles waited for
    ever)."""
    model = _HeldModel()
    model.release.set()
    worker = AgentSpec(name="worker", description="one model call", tools=())
    once: list[str] = []

    def first_on_the_supervisor(name: str) -> bool:
        if once or not threading.current_thread().name.startswith("SupervisorActor"):
            return False
        once.append(name)
        return True

    with Runtime({"worker": worker}, model=model, limits=Limits(timeout_s=WAIT)) as rt:
        dispatcher = rt._hosting.dispatcher
        assert dispatcher is not None and not dispatcher._started  # its first start is next
        refused = _refusing(monkeypatch, first_on_the_supervisor)
        handles = rt.spawn_many([("worker", "a"), ("worker", "b")])
        assert refused, "no thread start was refused"
        monkeypatch.undo()
        outcomes = [h.result(timeout=WAIT) for h in handles if isinstance(h, RunHandle)]
        assert [o.status for o in outcomes] == ["completed", "completed"], outcomes


def test_an_llm_start_blocks_only_when_its_first_handling_calls_the_model() -> None:
    """What the effector counts for ``Dispatcher.ready``: a fresh or continued run calls
    its model first; a restarted run with a user tool's call left to run runs it first, and
    a tool's run says it blocks (``ToolCalls._run_hooked``: ``about_to_block``), as a model
    call does; one whose calls left are the runtime's own (a spawn: answered when the child
    ends) and one that had ended block nothing at start. (Counted as blocking, each such
    restarted run of a wave had a spare started that idled.)"""
    blocks = LLMFactory.blocks_at_start
    use = ToolUseBlock(id="t1", name="Read", input={"path": "x"})
    other = ToolUseBlock(id="t2", name="Read", input={"path": "y"})
    spawn = ToolUseBlock(id="t3", name="spawn_subagent", input={"agent": "w", "task": "t"})
    task = ChatMessage("user", (TextBlock("the task"),))

    def restarted(*last: Any, answered: tuple[str, ...] = ()) -> Checkpoint:
        return Checkpoint(
            run_id="r",
            step=1,
            messages=(task, ChatMessage("assistant", last)),
            answered=tuple(ToolResultBlock(tool_use_id=a, content="ok") for a in answered),
        )

    assert blocks(None)  # a fresh run
    assert blocks(Checkpoint(run_id="r", step=0, messages=(task,)))  # continued: the user's
    assert blocks(Checkpoint(run_id="r", step=0, messages=()))
    assert not blocks(restarted(TextBlock("done")))  # it had ended
    assert blocks(restarted(TextBlock("reading"), use, other))  # its tools run: they block
    assert blocks(restarted(use, other, answered=("t1",)))  # one is left to run
    assert blocks(restarted(use, other, answered=("t1", "t2")))  # answered: the model next
    assert not blocks(restarted(spawn))  # handed to the supervisor: the child's end answers
    assert not blocks(restarted(use, spawn, answered=("t1",)))
    assert blocks(restarted(spawn, use, answered=("t3",)))  # the spawn answered, Read left
    check = ToolUseBlock(id="t4", name="check_mailbox", input={})
    assert blocks(restarted(check))  # answered at once: the model next, as answered
    assert not blocks(restarted(check, spawn))


def _waiting_for_the_lock_in(thread: threading.Thread, function: Any) -> bool:
    """Whether ``thread`` is at ``function``'s ``with self._lock:`` (blocked taking it)."""
    frame = sys._current_frames().get(thread.ident or 0)
    if frame is None or frame.f_code is not function.__code__:
        return False
    lines, first = inspect.getsourcelines(function)
    at = next(first + i for i, line in enumerate(lines) if "with self._lock:" in line)
    return frame.f_lineno == at


def test_a_handling_saying_it_blocks_as_the_watch_thread_replaces_it_is_counted_once() -> None:
    """A handling says it blocks (``about_to_block``: it looked, found itself not replaced,
    and waits for the dispatcher's lock) while the watch thread, holding that lock, finds
    its drain stalled and replaces it (``_replace``, as its look does). It must be counted
    as blocked once: one replacement owed, not two. Counted twice, the dispatcher's working
    count went below its threads for good (a thread more than ``size`` taking work, kept)
    and a second replacement was owed for nothing."""
    d = Dispatcher(size=1, stall_s=60.0, name="t-blocking-once")  # (no stall found alone)
    entered, go, said, release = (threading.Event() for _ in range(4))
    handling: list[threading.Thread] = []

    class Blocks(PooledActor):
        def on_receive(self, message: Any) -> Any:
            handling.append(threading.current_thread())
            entered.set()
            assert go.wait(WAIT)
            about_to_block()
            said.set()
            assert release.wait(WAIT)
            return message

    try:
        ref = Blocks.start(dispatcher=d)
        answer = ref.ask("hold", block=False)
        assert entered.wait(WAIT)
        (worker,) = d._workers
        with d._lock:  # (the watch thread's look, holding the lock)
            go.set()
            wait_until(
                lambda: _waiting_for_the_lock_in(handling[0], Dispatcher.blocking),
                "the handling waiting for the lock in about_to_block",
            )
            d._replace(worker)
        assert said.wait(WAIT)
        assert d.counts() == DispatcherCounts(working=0, replaced=1)
        assert d._owed == 1
        release.set()
        assert answer.get(timeout=WAIT) == "hold"
        wait_until(lambda: not worker.replaced, "the handling's thread back in its place")
        assert d.counts() == DispatcherCounts(working=1, replaced=0)
        assert d._owed == 0
        ref.stop(block=True, timeout=WAIT)
    finally:
        go.set()
        release.set()
        assert d.close(WAIT) == []


@pytest.mark.parametrize("refusals", [1, 3])
def test_a_stalled_drains_replacement_refused_a_thread_is_started_at_a_later_look(
    monkeypatch: pytest.MonkeyPatch, refusals: int
) -> None:
    """The one thread of a dispatcher is held in a handling that never says it blocks
    (found stalled by the watch thread), another actor's message waits, and the process
    refuses the replacement's thread (its limit), ``refusals`` times: the replacement stays
    owed and a later look starts it (the message is answered); once the held drain ends,
    the counts are one thread working, none replaced, none owed (a refused start left
    counted would be a thread for ever missing).

    The watch thread looks only once the warm-up is answered (``NEVER``, then poked): a
    warm-up drain found stalled on a loaded machine (over 20 ms) had its replacement started
    and parked in the pool, which the held drain's replacement then took with no start to
    refuse (seen: 1 run in ~150 at load ~12, the pool at 2 threads, 1 spare). Answered is
    not ended: the warm-up's drain may still be busy when the answer is read, so the test
    waits for it to end (``wait_idle``) before the watch thread's looks start."""
    d = Dispatcher(size=1, stall_s=NEVER, name="t-stall-refused")
    entered, release = threading.Event(), threading.Event()

    class Held(PooledActor):
        def on_receive(self, message: Any) -> Any:
            if message == "hold":
                entered.set()
                assert release.wait(WAIT)
            return message

    left = refusals

    def first_ones(name: str) -> bool:
        nonlocal left
        if not name.startswith("t-stall-refused") or left == 0:
            return False
        left -= 1
        return True

    try:
        held, other = Held.start(dispatcher=d), Held.start(dispatcher=d)
        assert held.ask("warm", timeout=WAIT) == "warm"  # the dispatcher's own start done
        assert d.wait_idle(WAIT)  # its drain ended too (answered, it may still be busy)
        assert (d._pool.threads, d._pool.spares) == (1, 0)  # no thread parked to be taken
        d.stall_s = 0.02  # the watch thread's looks from now on
        d._poked.set()
        refused = _refusing(monkeypatch, first_ones)
        holding = held.ask("hold", block=False)
        assert entered.wait(WAIT)
        assert other.ask("meanwhile", timeout=WAIT) == "meanwhile"  # on a new thread
        assert len(refused) == refusals
        release.set()
        assert holding.get(timeout=WAIT) == "hold"
        wait_until(  # (back past ``size``, it leaves once idle for ``LINGER_S``)
            lambda: d.counts() == DispatcherCounts(working=1, replaced=0), "one thread left"
        )
        assert d._owed == 0
        for ref in (held, other):
            ref.stop(block=True, timeout=WAIT)
    finally:
        release.set()
        monkeypatch.undo()
        assert d.close(WAIT) == []
