"""RootWaiters: where the outcomes of root runs land, one waiter per root run awaited.

Why apart from the Runtime: the runtime is the requester of every root run. The supervisor
tells it (on the supervisor's thread) a root's outcome, why a root run it was told to start
was refused, or that the root spawns it was told were decided (which releases the spawn
window, ``_spawn_window``); a caller's thread waits for one of those. This is that
hand-over, and nothing else: each waiter is set exactly once, and none stays behind a
refused or abandoned call.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from subagents.messages import (
    ChildDone,
    Outcome,
    RunStatus,
    SpawnReply,
    SpawnsDecided,
    ToOutside,
)
from subagents.runtime._spawn_window import SpawnWindow
from subagents.supervision.requests import CheckedRoots

_LANDING = threading.Lock()
"""Makes a waiter's check-and-open one step: a refusal, an outcome and the runtime's closing
may race to land in it; one opens it, the others find it open. Taken with ``acquire`` and
``release`` in a ``try``, as ``RootWaiters``' lock on every run's way (``expect``, ``landed``):
a ``with`` looks ``__enter__`` and ``__exit__`` up and binds each, ~2.0k instructions against
~0.9k (callgrind, Python 3.11)."""


_LONGEST = threading.TIMEOUT_MAX
"""The longest wait a lock can time (~292 years on Linux): a longer one (``math.inf``, which
``check_timeout`` keeps) is a wait without limit; ``acquire`` raised ``OverflowError`` for it."""


class Waiter:
    """One root run's outcome, landed exactly once (or why it was not admitted).

    Its waiting is one lock, taken when it is made and released when something lands (as
    ``actors.latch_future.LatchFuture``): a caller of ``Runtime.run`` waits on it at once,
    and a ``threading.Event`` would make a condition, a lock per wait and two notifications
    for that one wake-up, on the critical path of every run waited for (``benchmarks/
    spawn.py``). A lock is not tracked by the cyclic GC: 100,000 waiting runs hold one
    each."""

    __slots__ = ("_latch", "_open", "outcome", "refused")

    def __init__(self) -> None:
        self._latch = threading.Lock()
        self._latch.acquire()
        self._open = False
        self.outcome: Outcome | None = None
        self.refused: str | None = None
        """Why the run was not admitted (``run`` hears it here instead of from an ask)."""

    def is_set(self) -> bool:
        """Whether an outcome or a refusal has landed."""
        return self._open

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until something lands (at most ``timeout`` seconds); whether it has."""
        if self._open:
            return True
        latch = self._latch
        if timeout is None or timeout >= _LONGEST:  # (no limit, or one a lock cannot time)
            latch.acquire()
        elif not latch.acquire(timeout=timeout):
            return self._open
        latch.release()  # open for every other wait
        return True

    def refuse(self, reason: str) -> None:
        with _LANDING:
            if self._open:
                return
            self.refused = reason
            self._open = True
        self._latch.release()

    def land(self, outcome: Outcome) -> None:
        _LANDING.acquire()  # (not ``with``: see ``_LANDING``)
        try:
            if self._open:
                return
            self.outcome = outcome
            self._open = True
        finally:
            _LANDING.release()
        self._latch.release()


class RootWaiters:
    """The waiters of the root runs somebody waits for, by run id."""

    def __init__(self, deciding: Callable[[], bool] = lambda: False) -> None:
        """``deciding()``: whether the caller is the supervisor's own thread (``window``)."""
        self._waiters: dict[str, Waiter] = {}
        self._lock = threading.Lock()
        self.window = SpawnWindow(deciding)
        """The root spawns told and not decided yet (``RootRuns`` enters them)."""
        self.checked: CheckedRoots | None = None
        """The supervisor's record of the root requests ``RootRuns.spawn`` checked before
        telling them (``requests.CheckedRoots``; set once the supervisor's core is made):
        one refused before its admission looked (the store failed, the runtime closing) is
        forgotten when its refusal lands here."""

    def expect(self, run_id: str) -> Waiter:
        """A new waiter for a root run about to be asked for."""
        waiter = Waiter()
        lock = self._lock  # (not ``with``: see ``_LANDING``)
        lock.acquire()
        try:
            self._waiters[run_id] = waiter
        finally:
            lock.release()
        return waiter

    def attach(self, run_id: str) -> Waiter:
        """The waiter of ``run_id``, made if nobody waits for it yet."""
        with self._lock:
            waiter = self._waiters.get(run_id)
            if waiter is None:
                waiter = self._waiters[run_id] = Waiter()
            return waiter

    def forget(self, run_id: str) -> None:
        """Nobody waits any more (the call was refused or gave up)."""
        with self._lock:
            self._waiters.pop(run_id, None)

    def told(self, message: ToOutside) -> None:
        """What the supervisor tells the requester of root runs: an outcome, a refusal, or
        that the root spawns it was told were decided."""
        # (exact types, as the supervisor's messages are matched: ``type`` is no call event
        # of the profile's count, ``isinstance`` is one)
        if type(message) is SpawnsDecided:
            self.window.decided(message.request_ids)
            return
        if type(message) is SpawnReply:
            if message.error is not None:  # the caller holds its waiter: none stays here
                if self.checked is not None:
                    self.checked.forget(message.request_id)
                with self._lock:
                    refused = self._waiters.pop(message.request_id, None)
                if refused is not None:
                    refused.refuse(message.error)
            self.window.decided((message.request_id,))
            return
        assert type(message) is ChildDone  # (the rest of ``ToOutside``)
        self.landed(message.outcome)

    def landed(self, outcome: Outcome) -> None:
        lock = self._lock  # (not ``with``: see ``_LANDING``)
        lock.acquire()
        try:
            waiter = self._waiters.pop(outcome.run_id, None)
        finally:
            lock.release()
        if waiter is not None:
            waiter.land(outcome)

    def waiting(self) -> list[str]:
        """The root runs waited for now."""
        with self._lock:
            return list(self._waiters)

    def cancel_all(self, reason: str) -> None:
        """The runtime closed: every waiter gets a cancelled outcome, and the window waits
        for nothing more."""
        self.window.close()
        with self._lock:
            waiters, self._waiters = self._waiters, {}
        for run_id, waiter in waiters.items():
            waiter.land(
                Outcome(
                    run_id=run_id, status=RunStatus.CANCELLED, error_kind="cancelled", error=reason
                )
            )
