"""A dispatcher thread back from a blocked handling keeps taking work for a while
(``pooled.LINGER_S``) instead of leaving for the pool at once: the next handling that
blocks (a fan-out's next child) takes no thread from the pool and owes no replacement.

Real actors, real threads; every wait is on an event or a future, with a timeout, or a
poll whose timeout is a hang guard. ``LINGER_S`` is set per test (a module global read at
each park): long where a test reads the counts while a thread lingers, short where it waits
for one to leave, so no assertion depends on how fast the machine is.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from polling import wait_until
from subagents.actors import pooled
from subagents.actors.pooled import Dispatcher, DispatcherCounts
from subagents.actors.pooled_actor import PooledActor
from subagents.blocking import about_to_block

WAIT = 30.0
NEVER = 3600.0
"""A ``stall_s`` (and a linger) no test reaches: only ``about_to_block`` replaces."""


class Blocks(PooledActor):
    """Says it blocks, then waits until its release is set; answers its thread."""

    def __init__(self, entered: threading.Event, release: threading.Event) -> None:
        super().__init__()
        self.entered, self.release = entered, release

    def on_receive(self, message: Any) -> Any:
        about_to_block()
        self.entered.set()
        assert self.release.wait(WAIT)
        return threading.current_thread()


class Echo(PooledActor):
    def on_receive(self, message: Any) -> Any:
        return threading.current_thread()


def test_a_thread_back_from_a_block_takes_the_next_blocking_handling_and_later_leaves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One dispatcher thread; a handling blocks, another actor's message is answered on a
    thread from the pool in its place; the block ends: its thread stays taking work (two
    take work, none parked in the pool) and the next handling that blocks owes no
    replacement (the other one takes work). Once idle for ``LINGER_S``, one leaves for the
    pool: the counts are back to one taking work."""
    monkeypatch.setattr(pooled, "LINGER_S", NEVER)
    d = Dispatcher(size=1, stall_s=NEVER, name="t-linger")
    entered, release = threading.Event(), threading.Event()
    try:
        first = Blocks.start(entered, release, dispatcher=d)
        echo = Echo.start(dispatcher=d)
        blocked = first.ask("block", block=False)
        assert entered.wait(WAIT)
        assert echo.ask("meanwhile", timeout=WAIT) is not None  # on the replacement
        release.set()
        blocked_on = blocked.get(timeout=WAIT)
        wait_until(lambda: d.counts().replaced == 0, "the blocked thread back")
        assert d.wait_idle(WAIT)
        assert d.counts() == DispatcherCounts(working=2, replaced=0)  # it stayed (before:
        # it left for the pool, one taking work)
        assert d._owed == 0

        again, release_again = threading.Event(), threading.Event()
        second = Blocks.start(again, release_again, dispatcher=d)
        later = second.ask("block", block=False)
        assert again.wait(WAIT)
        assert d.counts() == DispatcherCounts(working=1, replaced=1)
        assert d._owed == 0  # one still takes work: no replacement owed
        assert echo.ask("meanwhile", timeout=WAIT) is not None
        release_again.set()
        assert later.get(timeout=WAIT) in d.threads()
        assert blocked_on in d.threads()

        monkeypatch.setattr(pooled, "LINGER_S", 0.01)  # read at the next park
        assert echo.ask("wake one", timeout=WAIT) is not None  # it parks again, briefly
        wait_until(lambda: d.counts() == DispatcherCounts(working=1, replaced=0), "one thread left")
        assert echo.ask("still answered", timeout=WAIT) is not None
        for ref in (first, second, echo):
            ref.stop(block=True, timeout=WAIT)
    finally:
        release.set()
        assert d.close(WAIT) == []


def test_threads_past_size_leave_once_idle_and_never_fewer_than_size_stay(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two handlings block at once on a dispatcher of one thread, each replaced; both end:
    three threads take work, two past ``size``. Idle for a brief ``LINGER_S``, they leave,
    however their timeouts fall together, and the last one stays: one takes work, and a
    message is still answered."""
    monkeypatch.setattr(pooled, "LINGER_S", NEVER)
    d = Dispatcher(size=1, stall_s=NEVER, name="t-linger-size")
    releases = [threading.Event(), threading.Event()]
    try:
        asks = []
        for release in releases:
            entered = threading.Event()
            asks.append(Blocks.start(entered, release, dispatcher=d).ask("block", block=False))
            assert entered.wait(WAIT)
        assert d.counts() == DispatcherCounts(working=0, replaced=2)
        echo = Echo.start(dispatcher=d)
        assert echo.ask("meanwhile", timeout=WAIT) is not None  # on a replacement
        monkeypatch.setattr(pooled, "LINGER_S", 0.001)  # the two back park briefly
        for release, ask in zip(releases, asks, strict=True):
            release.set()
            assert ask.get(timeout=WAIT) is not None
        wait_until(  # (two left: had the last one left too, never one)
            lambda: d.counts() == DispatcherCounts(working=1, replaced=0), "one thread left"
        )
        assert echo.ask("still answered", timeout=WAIT) is not None
    finally:
        for release in releases:
            release.set()
        assert d.close(WAIT) == []


def test_an_idle_thread_leaves_only_while_more_than_size_take_work() -> None:
    """The rule ``_leaves`` applies under the lock (no thread: the counts set by hand):
    idle past its linger, a thread leaves while more than ``size`` take work, counted out
    at once (so two timing out together leave no fewer than ``size``), and stays at
    ``size``."""
    d = Dispatcher(size=1, stall_s=NEVER, name="t-linger-rule")
    worker = pooled._Worker()
    d._working = 2
    assert d._leaves(worker)
    assert (d._working, worker.replaced) == (1, True)  # (not counted out again as it goes)
    other = pooled._Worker()
    assert not d._leaves(other)
    assert (d._working, other.replaced) == (1, False)
    assert d.close(WAIT) == []


def test_a_thread_counted_out_owes_a_replacement_only_below_size() -> None:
    """The rule ``_replace`` applies under the lock (``about_to_block``, or the watch
    thread finding a drain stalled; no thread: the counts set by hand): while ``size``
    others take work (threads back from a block, past ``size``) nothing is owed, else one
    thread is. Before, a stall under load owed (and started) one each time beside the
    threads lingering, and a dispatcher of 3 held 10 (seen in
    ``test_idle_actors_hold_no_thread_and_closing_joins_every_thread`` at load 60)."""
    d = Dispatcher(size=1, stall_s=NEVER, name="t-linger-owe")
    with d._lock:
        d._working = 2
        lingering, alone = pooled._Worker(), pooled._Worker()
        assert not d._replace(lingering)
        assert (d._working, d._owed, lingering.replaced) == (1, 0, True)
        assert d._replace(alone)
        assert (d._working, d._owed, alone.replaced) == (0, 1, True)
    assert d.close(WAIT) == []


class Silent(PooledActor):
    """Waits until its release is set without saying it blocks (a sync tool, a lock): only
    the watch thread, finding its drain stalled, counts its thread out."""

    def __init__(self, entered: threading.Event, release: threading.Event) -> None:
        super().__init__()
        self.entered, self.release = entered, release

    def on_receive(self, message: Any) -> Any:
        self.entered.set()
        assert self.release.wait(WAIT)
        return threading.current_thread()


def _lingering(d: Dispatcher, blocks: int) -> list[threading.Event]:
    """``blocks`` handlings block at once (each replaced as work came for it), then end:
    every thread takes work (``LINGER_S`` set past the test by the caller). The releases,
    set."""
    releases, asks = [], []
    for _ in range(blocks):
        entered, release = threading.Event(), threading.Event()
        releases.append(release)
        asks.append(Blocks.start(entered, release, dispatcher=d).ask("block", block=False))
        assert entered.wait(WAIT)
    for release, ask in zip(releases, asks, strict=True):
        release.set()
        assert ask.get(timeout=WAIT) is not None
    wait_until(lambda: d.counts().replaced == 0, "every blocked thread back")
    return releases


def test_every_thread_blocking_at_once_past_size_owes_size_replacements(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A dispatcher of two with two threads back from blocks (four take work, or five);
    as many handlings block at once, one on each: the first two owe nothing (two others still take
    work), the last two owe one each, so ``size`` are owed, and a message sent meanwhile is
    answered on one of them: blocked handlings never starve the others, lingering or not."""
    monkeypatch.setattr(pooled, "LINGER_S", NEVER)
    d = Dispatcher(size=2, stall_s=NEVER, name="t-linger-all-block")
    releases: list[threading.Event] = []
    try:
        releases += _lingering(d, 4)
        working = d.counts().working  # (4, or 5: a replacement paid twice, by a give and
        assert working >= 4  # by the watch thread's look, lingers too)
        entries = [(threading.Event(), threading.Event()) for _ in range(working)]
        refs = [Blocks.start(entered, release, dispatcher=d) for entered, release in entries]
        echo = Echo.start(dispatcher=d)
        releases += [release for _, release in entries]
        assert d.wait_idle(WAIT)  # (started: no ``on_start`` drain races an ask below)
        wait_until(  # (each ask below handed to a parked one: none in line to pay for)
            lambda: len(d._handoff._parked) == working, "every thread parked"
        )
        asks = []
        for ref, (entered, _) in zip(refs, entries, strict=True):
            asks.append(ref.ask("block", block=False))
            assert entered.wait(WAIT)
        assert d.counts() == DispatcherCounts(working=0, replaced=working)
        assert d._owed >= d.size
        assert echo.ask("meanwhile", timeout=WAIT) is not None
        for release in releases:
            release.set()
        for ask in asks:
            assert ask.get(timeout=WAIT) is not None
    finally:
        for release in releases:
            release.set()
        assert d.close(WAIT) == []
    assert d.threads() == []


def test_silent_stalls_of_every_thread_past_size_leave_no_message_waiting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A dispatcher of one with two threads back from blocks (three take work, or more);
    as many handlings stall on them without saying they block: the watch thread counts each out,
    the last one owes a replacement, and a message sent meanwhile is answered."""
    monkeypatch.setattr(pooled, "LINGER_S", NEVER)
    d = Dispatcher(size=1, stall_s=NEVER, name="t-linger-stalls")
    releases: list[threading.Event] = []
    try:
        releases += _lingering(d, 3)
        working = d.counts().working
        assert working >= 3
        d.stall_s = 0.05  # the watch thread looks from now on
        d._poked.set()
        asks = []
        for _ in range(working):
            entered, release = threading.Event(), threading.Event()
            releases.append(release)
            asks.append(Silent.start(entered, release, dispatcher=d).ask("stall", block=False))
            assert entered.wait(WAIT)
        echo = Echo.start(dispatcher=d)
        assert echo.ask("meanwhile", timeout=WAIT) is not None
        for release in releases:
            release.set()
        for ask in asks:
            assert ask.get(timeout=WAIT) is not None
    finally:
        for release in releases:
            release.set()
        assert d.close(WAIT) == []
    assert d.threads() == []


def test_threads_back_from_blocks_are_bounded_and_closing_ends_the_lingering_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ten handlings block at once on a dispatcher of one with ``spare=3`` (the pool keeps
    three parked): back, at most ``size + 3`` take work and the rest leave (for the pool, up
    to its three, or end); closing while they linger (a park of an hour) ends every one."""
    monkeypatch.setattr(pooled, "LINGER_S", NEVER)
    d = Dispatcher(size=1, stall_s=NEVER, name="t-linger-bound", spare=3)
    releases: list[threading.Event] = []
    try:
        releases += _lingering(d, 10)
        assert d.counts().working <= 4
        wait_until(lambda: len(d.threads()) <= 1 + 4 + 3, "the threads past the pool's end")
        assert Echo.start(dispatcher=d).ask("answered", timeout=WAIT) is not None
    finally:
        for release in releases:
            release.set()
        assert d.close(WAIT) == []
    assert d.threads() == []


def test_drains_found_stalled_do_not_grow_the_threads_taking_work(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A drain the watch thread finds stalled (a slow handling on a loaded machine, no
    block said) is replaced as before, but its thread, back, takes work past ``size`` only
    if its handling said it blocks: three rounds of every thread stalling at once leave
    ``size`` taking work. (Rejoining past ``size`` after a stall too, each round where all
    stalled at once added ``size`` threads taking work, up to the pool's ``max_idle`` past
    it: a dispatcher of 3 in ``test_idle_actors_hold_no_thread...`` at load 60 held 10.)"""
    monkeypatch.setattr(pooled, "LINGER_S", NEVER)
    d = Dispatcher(size=1, stall_s=0.05, name="t-linger-stall-ratchet")
    releases: list[threading.Event] = []
    try:
        echo = Echo.start(dispatcher=d)
        for _ in range(3):
            working = d.counts().working
            asks = []
            for _ in range(working):
                entered, release = threading.Event(), threading.Event()
                releases.append(release)
                asks.append(Silent.start(entered, release, dispatcher=d).ask("s", block=False))
                assert entered.wait(WAIT)
            assert echo.ask("meanwhile", timeout=WAIT) is not None
            for release in releases:
                release.set()
            for ask in asks:
                assert ask.get(timeout=WAIT) is not None
            wait_until(lambda: d.counts().replaced == 0, "every stalled thread back or gone")
        assert d.counts().working == d.size
    finally:
        for release in releases:
            release.set()
        assert d.close(WAIT) == []
