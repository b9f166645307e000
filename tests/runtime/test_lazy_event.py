"""LazyEvent behaves as a threading.Event, and the runtime's actors are made as pykka makes
them (with a LazyEvent as ``actor_stopped``)."""

from __future__ import annotations

import multiprocessing
import sys
import threading
import uuid
from typing import Any

import pykka
import pytest

from polling import wait_until
from subagents.actors.inbox import FastInboxActor, actor_urn
from subagents.actors.lazy_event import LazyEvent

WAIT = 60.0


def test_set_before_wait_returns_at_once() -> None:
    event = LazyEvent()
    assert not event.is_set()
    assert event.wait(0.0) is False
    event.set()
    assert event.is_set()
    assert event.wait(0.0) is True
    event.clear()
    assert not event.is_set()
    assert event.wait(0.0) is False


def test_a_waiting_thread_is_woken_by_set() -> None:
    event = LazyEvent()
    woke: list[bool] = []
    started = threading.Event()

    def waiter() -> None:
        started.set()
        woke.append(event.wait(WAIT))

    thread = threading.Thread(target=waiter)
    thread.start()
    assert started.wait(WAIT)
    event.set()
    thread.join(WAIT)
    assert woke == [True]


@pytest.mark.parametrize("rounds", [200])
def test_set_racing_the_first_wait_is_never_lost(rounds: int) -> None:
    """The condition is made by the first ``wait`` while another thread sets the flag: the
    waiter must see the set, whichever comes first (a lost wake-up would wait WAIT s and
    return False)."""
    for _ in range(rounds):
        event = LazyEvent()
        go = threading.Barrier(2)
        seen: list[bool] = []

        def waiter(e: LazyEvent = event, b: threading.Barrier = go, out: list[bool] = seen) -> None:
            b.wait(WAIT)
            out.append(e.wait(WAIT))

        thread = threading.Thread(target=waiter)
        thread.start()
        go.wait(WAIT)
        event.set()
        thread.join(WAIT + 1)
        assert seen == [True]


def test_first_waits_racing_each_other_and_a_set_all_wake() -> None:
    """Several threads make the condition at once (no lock orders them: one condition is
    kept) while another sets the flag: every waiter sees the set. Thread switches every
    microsecond make the interleavings many; a waiter left on a condition nobody notifies
    would wait WAIT s and return False."""
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for _ in range(100):
            event = LazyEvent()
            go = threading.Barrier(5)
            seen: list[bool] = []

            def waiter(
                e: LazyEvent = event, b: threading.Barrier = go, out: list[bool] = seen
            ) -> None:
                b.wait(WAIT)
                out.append(e.wait(WAIT))

            threads = [threading.Thread(target=waiter) for _ in range(4)]
            for thread in threads:
                thread.start()
            go.wait(WAIT)
            event.set()
            for thread in threads:
                thread.join(WAIT + 1)
            assert seen == [True] * 4
    finally:
        sys.setswitchinterval(switch)


def test_two_first_waits_making_the_condition_at_once_share_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Both first waits find no condition and make one at the same time (each making is
    held until both are making): both must end up waiting on the one kept, the one ``set``
    notifies. Two conditions kept would leave a waiter on one nobody notifies."""
    both_making = threading.Barrier(2)
    real = threading.Condition

    def making(lock: Any = None) -> threading.Condition:
        if threading.current_thread() in threads:  # (not another test's leftover thread
            both_making.wait(WAIT)  # making an Event meanwhile: it would take a place)
        return real(lock)

    event = LazyEvent()
    got: list[threading.Condition] = []
    go = threading.Event()  # (the threads start before the patch: a start makes a condition)

    def first_wait() -> None:
        go.wait(WAIT)
        got.append(event._condition())

    threads = [threading.Thread(target=first_wait) for _ in range(2)]
    for thread in threads:
        thread.start()
    monkeypatch.setattr(threading, "Condition", making)
    go.set()
    for thread in threads:
        thread.join(WAIT)
    monkeypatch.undo()
    assert len(got) == 2
    assert got[0] is got[1] is event._lazy


def test_a_waiter_after_a_clear_waits_again() -> None:
    """``clear`` (no lock either): a wait after it waits for the next ``set``."""
    event = LazyEvent()
    event.set()
    event.clear()
    assert event.wait(0.01) is False
    woke: list[bool] = []
    started = threading.Event()

    def waiter() -> None:
        started.set()
        woke.append(event.wait(WAIT))

    thread = threading.Thread(target=waiter)
    thread.start()
    assert started.wait(WAIT)
    event.set()
    thread.join(WAIT)
    assert woke == [True]


def test_it_is_a_threading_event() -> None:
    assert isinstance(LazyEvent(), threading.Event)


def test_actor_urn_is_a_uuid4_urn_and_unique() -> None:
    urns = {actor_urn() for _ in range(10_000)}
    assert len(urns) == 10_000
    for urn in list(urns)[:100]:
        assert urn.startswith("urn:uuid:")
        parsed = uuid.UUID(urn.removeprefix("urn:uuid:"))
        assert parsed.version == 4
        assert parsed.variant == uuid.RFC_4122


def _urn_in_child(conn: Any) -> None:
    conn.send(actor_urn())


def test_a_forked_child_draws_its_own_actor_urns() -> None:
    """Urns are a per-process random prefix and a count: a forked child (which copies both)
    draws a new prefix, so its actors' urns are not its parent's next ones."""
    context = multiprocessing.get_context("fork")
    ours, theirs = context.Pipe()
    mine = actor_urn()
    child = context.Process(target=_urn_in_child, args=(theirs,))
    child.start()
    assert ours.poll(60)
    forked = ours.recv()
    child.join(60)
    assert child.exitcode == 0
    assert forked.rsplit("-", 1)[0] != mine.rsplit("-", 1)[0]


class _Echo(FastInboxActor):
    def on_receive(self, message: Any) -> Any:
        return message


def test_fast_inbox_actor_sets_every_field_pykka_sets() -> None:
    """FastInboxActor.__init__ sets pykka.Actor.__init__'s fields itself (a LazyEvent for
    ``actor_stopped``): a pykka upgrade adding one must fail here, not in a run."""

    class _Plain(pykka.ThreadingActor):
        pass

    plain = set(vars(_Plain()))
    ours = _Echo()
    assert plain <= set(vars(ours))
    assert isinstance(ours.actor_stopped, LazyEvent)


def test_fast_inbox_actor_lives_and_stops_as_pykka_does() -> None:
    ref = _Echo.start()
    assert ref.is_alive()
    assert ref.ask("hello", timeout=WAIT) == "hello"
    ref.stop(block=True, timeout=WAIT)
    assert not ref.is_alive()
    with pytest.raises(pykka.ActorDeadError):
        ref.tell("late")


class _SetWhileMaking(LazyEvent):
    """A LazyEvent whose first ``wait`` is set right after it made its condition and before
    it takes it: the set finds the condition made and nobody waiting on it yet."""

    def _condition(self) -> threading.Condition:
        cond = super()._condition()
        self.set()  # (another thread's set, at exactly this point: its notify finds no waiter)
        return cond


def test_a_set_between_the_waits_making_and_its_look_is_seen() -> None:
    """The interleaving that a wait without its second look at the flag (under the
    condition) loses: the set's notify comes before the waiter waits, and nothing else
    would ever wake it. The wait must return True at once, not after its timeout."""
    event = _SetWhileMaking()
    assert event.wait(5.0) is True  # (it never waits: the set came before)


class _WaiterRunsWhileSetting(LazyEvent):
    """A LazyEvent whose ``set``'s look at the condition lets a whole first ``wait`` run on
    another thread (until it waits or returns) before the set goes on with what it saw."""

    def __init__(self) -> None:
        super().__init__()
        self.waited: list[bool] = []
        self.thread: threading.Thread | None = None

    @property
    def _lazy(self) -> threading.Condition | None:  # type: ignore[override]
        seen: threading.Condition | None = self.__dict__.get("_lazy")
        if self.thread is None and threading.current_thread() is threading.main_thread():
            self.thread = threading.Thread(target=lambda: self.waited.append(self.wait(5.0)))
            self.thread.start()
            wait_until(lambda: bool(self.waited) or _has_waiter(self), "the waiter waiting")
        return seen


def _has_waiter(event: LazyEvent) -> bool:
    cond = event.__dict__.get("_lazy")
    return cond is not None and bool(cond._waiters)


def test_a_first_wait_made_between_the_flag_and_the_sets_look_is_woken() -> None:
    """The other order: a first wait makes its condition and waits while a ``set`` is
    between its two steps. With the flag stored first (the code) the waiter sees it; a set
    that looked for the condition before storing the flag would notify nothing, and the
    waiter would wait its whole timeout (5 s: with the flag stored first, it never waits)."""
    event = _WaiterRunsWhileSetting()
    event.set()
    assert event.thread is not None
    event.thread.join(WAIT + 1)
    assert event.waited == [True]
