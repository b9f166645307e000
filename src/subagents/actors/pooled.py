"""Dispatcher: the threads of ``PooledActor``s, actors that hold a thread only while they
have messages (the actor's side: ``actors/pooled_actor.py``).

A pykka ``ThreadingActor`` is a thread blocked on its inbox. For a runtime whose runs spend
most of their lives waiting (on a child, on mail), that makes every waiting run cost an OS
thread: its stack, a kernel task, a pid. A machine runs out of those long before it runs out
of memory (``pid_max`` is 32,768 by default), and stopping n threads costs n joins.

A ``PooledActor`` is a pykka actor built on pykka's own extension points for actor types
(``_create_actor_inbox``, ``_create_future``, ``_start_actor_loop``): its inbox, a
``Mailbox``, is a deque that asks a ``Dispatcher`` to run the actor when a message arrives
and nobody runs it yet; one of the dispatcher's threads then hands the actor's messages to
pykka's handling (``_handle_receive``: proxies, ``_ActorStop``, ``on_receive``; replies to
asks; ``on_failure``) until the mailbox is empty, and goes on to the next actor. An actor
with an empty mailbox is only its Python objects.

Guarantees kept from pykka: messages are handled in the order they were put, one at a time
(a mailbox is *scheduled* from the put that found it idle until the drain that found it
empty; only the thread it was handed to drains it); ``on_start`` runs
before the first message, ``on_stop`` after the last; asks put after the stop get
``ActorDeadError``. Differences, named: the actor is not put in pykka's ``ActorRegistry``
(a list, whose ``unregister`` is O(n): 100,000 actors would take minutes to stop), so
``ActorRegistry.stop_all`` does not see it (its owner stops it); a ``BaseException`` in a
handling stops that actor only, not every actor of the process, and an ask's asker hears it
(``turn_failures.py``).

Blocking user code (a model call, a plain ``def`` tool, a sync function agent) runs in a
handling and so on a dispatcher thread. It must not starve the other actors: a *watch*
thread looks at the dispatcher's threads every ``stall_s`` and replaces each one that has
been in the same drain for longer than that (its actor is still drained by it, so ordering
holds; it leaves the pool when that drain ends, or takes its place back if that one is not
started yet; the new thread is started with the dispatcher's lock let go: ``_start_owed``).
So at least ``size`` threads always take new work within about ``2 * stall_s``, however many
handlings block, and the threads that exist are those ``size`` (and those back from a
block, up to the pool's ``max_idle`` past it, each until it waits ``LINGER_S`` for work)
plus one per handling blocked right now: never one per waiting actor. (Go's scheduler does
the same for goroutines blocked in system calls.)

Code that knows it is about to block says so (``subagents.blocking.about_to_block()``) and
its thread is replaced at once (Java's ``ForkJoinPool.managedBlock``); replaced threads park
in the pool (up to ``spare``) for the next replacement (docs/architecture.md, "Threads").

A replaced thread whose blocked handling ended takes work again, past ``size`` if need be
(if it said it blocks: a drain only found stalled rejoins below ``size``, else a loaded
machine's stalls grew the threads taking work), and leaves for the pool only once it
waited ``LINGER_S`` for work with more than ``size`` taking it (``_leaves``); a handling
that blocks while ``size`` others take work owes no replacement. Why: in a fan-out each
child's thread comes back from its model call as the next child's call is about to block;
leaving for the pool at once, it was woken from there again for that next child through a
replacement owed and paid (``_pay``: the pool's lock, its queue, the thread's set-up and
tear-down in ``_work``), ~5% of a child's instructions.
"""

from __future__ import annotations

import functools
import threading
import time
from dataclasses import dataclass
from typing import Protocol

from subagents.actors.gc_pacing import PACING
from subagents.actors.handoff import Handoff, Seat, pay_nudge
from subagents.actors.tally import Tally
from subagents.actors.threads import NoThread, ThreadPool, default_size
from subagents.blocking import set_hook
from subagents.logs import get_logger

log = get_logger("subagents.dispatch")

LINGER_S = 1.0
"""How long a thread taking work past ``size`` (one that rejoined after a blocked handling)
waits parked for work before it leaves for the pool (``Dispatcher._leaves``)."""

THROUGHPUT = 64
"""Messages one drain hands an actor before it goes to the back of the line: an actor
flooded with mail does not keep a thread from every other actor."""


class _Worker(Seat):
    """One dispatcher thread: where it parks for work, and what the watch thread sees of it
    (``busy_since``: when its current drain started, 0.0 while it waits for work)."""

    __slots__ = ("said_blocks",)
    # ``replaced`` (``Seat``): counted as blocked (``blocking``, or the watch thread saw it
    # stall), another thread started or owed in its place

    def __init__(self) -> None:
        super().__init__()
        self.said_blocks = False
        """Its current drain said it blocks (``blocking``), not only stalled: back, it may
        take work past ``size`` (``_rejoin``)."""


@dataclass(frozen=True)
class DispatcherCounts:
    """The dispatcher's threads: those counted as taking work (past ``size``, those back
    from a block until one waits ``LINGER_S`` for work), and those replaced because their
    handling blocked (they take work again when it ends)."""

    working: int
    replaced: int


class Drained(Protocol):
    """What a dispatcher thread runs: an actor whose mailbox has messages (a
    ``PooledActor``, ``actors/pooled_actor.py``: it imports this module, not the reverse)."""

    def _drain(self) -> None: ...


class Dispatcher:
    """A few threads that run ``PooledActor`` mailboxes which have messages."""

    def __init__(
        self,
        size: int | None = None,
        *,
        stall_s: float = 0.05,
        name: str = "subagents-dispatch",
        spare: int = 128,
    ) -> None:
        size = default_size() if size is None else size
        if size < 1:
            raise ValueError("a dispatcher needs at least one thread")
        if stall_s <= 0:
            raise ValueError("stall_s must be positive")
        self.size = size
        self.stall_s = stall_s
        self.name = name
        # Threads come from a pool of their own: a thread replaced while blocked parks there
        # when its handling ends, for the next replacement.
        self._pool = ThreadPool(name=name, max_idle=max(size, spare))
        self._handoff: Handoff[Drained] = Handoff()
        """Actors with messages, each handed to one parked thread (a queue per thread: one
        shared by every idle thread cost twice as much per hand-off; ``handoff.py``)."""
        self._lock = threading.Lock()
        self._workers: set[_Worker] = set()
        self._working = 0  # workers not counted as blocked
        self._owed = 0
        """Threads that said they block (``about_to_block``) and whose replacement is not
        started yet: when work finds no thread waiting for it (``submit``) it starts on a
        thread parked in the pool, else the watch thread starts one (``_poked``); a blocked
        thread that comes back first takes its place instead (``_rejoin``)."""
        self._closed = threading.Event()
        self._poked = threading.Event()  # a replacement found no parked thread
        self._drained = threading.Condition(self._lock)  # a drain ended, someone waits for idle
        self._idle_waiters = 0
        self._starts = Tally()  # actors started (no lock: a convoy per run, ``tally.py``)
        self._stops = Tally()  # actors stopped
        self._started = False
        self._ahead = 0
        """Spares asked for ahead of a wave of handlings about to block (``ready``)."""
        self._watch: threading.Thread | None = None

    # ---- running -----------------------------------------------------------------------------

    def submit(self, actor: Drained) -> None:
        """Put ``actor`` (scheduled: its mailbox has messages) in line for a thread. After
        ``close`` nothing takes it: the runtime stopped its actors before closing."""
        if not self._started and not self._start():
            raise NoThread(
                f"{self.name} could not start a thread (the process's thread limit): "
                f"{actor} was not handed on; the next message put tries again"
            )
        if not self._handoff.give(actor) and self._owed:  # a thread blocked, none was idle
            self._pay()

    def _start(self) -> bool:
        """The watch thread, then ``size`` threads taking work; False if it could not start.
        At the process's thread limit it raises into nobody (a wave's ``ready`` inside
        ``Effector.apply``): with no watch thread it is not started yet (``submit`` raises
        ``NoThread``, the mailbox's turn let go: the next message tries again; before, the
        actor waited in line for a start nobody made, its turn held, and every ask of it
        went unanswered); a thread of its own it could not have is owed, as a blocked thread's
        replacement is, started when work waits for it (``_pay``; the watch thread's looks).
        (A refused start had left it started with no watch thread: nothing was replaced any
        more, and the mail behind every blocked handling waited for ever.)"""
        with self._lock:
            if self._started or self._closed.is_set():
                return True
            ThreadPool.refuse_if_exiting(self.name)  # (its watch thread's start: see there)
            watch = threading.Thread(target=self._watching, name=f"{self.name}-watch")
            watch.daemon = True
            try:
                watch.start()
            except Exception:
                log.warning("no thread to start the dispatcher; tried again", exc_info=True)
                return False
            self._watch = watch
            self._started = True
            for missing in range(self.size, 0, -1):
                try:
                    self._add_worker()
                except Exception:
                    self._owed += missing
                    log.warning("dispatcher threads owed: none to be had", exc_info=True)
                    break
        PACING.register(self)  # its live runs count towards the GC's pacing
        return True

    def _add_worker(self, parked_only: bool = False) -> bool:
        """One more thread taking work (``_lock`` held); ``parked_only``: or none (False)."""
        worker = _Worker()
        job = functools.partial(self._work, worker)
        if parked_only and not self._pool.try_run(job):
            return False
        if not parked_only:
            self._pool.run(job)
        self._workers.add(worker)
        self._working += 1
        return True

    def _start_owed(self, if_none_waits: bool = False) -> bool:
        """Start one owed replacement (whether it did): on a parked thread, else a new one,
        started after ``_lock`` is let go (the watch thread). ``if_none_waits``: not while a
        thread is parked waiting for work (it takes the work that waits).

        Why the new thread's start is outside the lock: ``Thread.start`` waits until the new
        thread runs, behind the GIL (milliseconds on a busy process), and every handling that
        says it blocks and every blocked drain's end takes the lock: under it, a fan-out of
        500 children x 50 ms (``about_to_block`` per model call) found the lock held 70
        times in 2,057, waiting 0.6/38 ms (p50/p99), the lock held 10 ms at its p99.9."""
        with self._lock:
            if not self._owed or self._closed.is_set():
                return False
            if if_none_waits and self._handoff.waiting:
                return False
            try:
                if self._add_worker(parked_only=True):
                    self._owed -= 1
                    return True
            except Exception:  # (the pool closed): nothing to start
                log.warning("no thread to replace a blocking dispatcher thread", exc_info=True)
                return False
            worker = _Worker()  # counted now: a drain ending meanwhile sees it coming
            self._workers.add(worker)
            self._working += 1
            self._owed -= 1
        try:
            self._pool.run(functools.partial(self._work, worker))
        except Exception:  # no thread to be had: owed again, tried again at a later look
            log.warning("no thread to replace a blocking dispatcher thread", exc_info=True)
            with self._lock:
                self._workers.discard(worker)
                self._working -= 1
                self._owed += 1
            return False
        return True

    def _work(self, worker: _Worker) -> None:
        take = self._handoff.take
        set_hook(
            functools.partial(self.blocking, worker), functools.partial(self.unblocked, worker)
        )
        self._handoff.taking(True, worker)
        try:
            while True:
                actor = take(worker, LINGER_S if self._working > self.size else None)
                if actor is None:  # closing, or past ``size`` and idle for ``LINGER_S``
                    if self._handoff.closed or self._leaves(worker):
                        return
                    continue
                # (busy since it was handed ``actor``: ``take`` or the giver set it)
                try:
                    actor._drain()  # the dispatcher is the actor's loop
                except BaseException:
                    log.exception("draining an actor failed", actor=str(actor))
                actor = None  # (an ended run's objects are not held while this thread waits)
                worker.busy_since = 0.0
                if self._idle_waiters:
                    with self._lock:
                        self._drained.notify_all()
                if worker.replaced and not self._rejoin(worker):
                    return
        finally:
            set_hook(None)
            self._handoff.taking(False)
            with self._lock:
                self._workers.discard(worker)
                if not worker.replaced:
                    self._working -= 1

    def _replace(self, worker: _Worker) -> bool:
        """Count ``worker`` as blocked and, unless ``size`` others take work (threads back
        from a block, past ``size``), owe a thread in its place (``_lock`` held; started
        once the lock is let go: ``_start_owed``, ``_pay``). It drains on (its actor's order
        holds) and takes work again when that ends (``_rejoin``). Whether one is owed now."""
        if worker.replaced or self._closed.is_set():
            return False
        worker.replaced = True
        self._working -= 1
        if self._working >= self.size:  # (else a stall under load started a thread beside
            return False  # the lingering ones, each time)
        self._owed += 1
        return True

    def _pay(self, start: bool = False) -> bool:
        """Start one owed replacement (whether it did), if no thread waits for work: on a parked
        thread, or a new one if ``start`` (the watch thread), else the watch thread is poked."""
        if start:
            return self._start_owed(if_none_waits=True)
        with self._lock:
            if not self._owed or self._handoff.waiting or self._closed.is_set():
                return False
            try:
                added = self._add_worker(parked_only=True)
            except Exception:  # (the pool closed): nothing to start
                log.warning("no thread to replace a blocking dispatcher thread", exc_info=True)
                return False
            if not added:
                self._poked.set()
                return False
            self._owed -= 1
            return True

    def _add_spares(self, spares: bool) -> None:
        """Owed replacements while work waits; then the spares asked for ahead (``ready``)
        and (``spares``) one per blocked handling, but never more of those than the live
        actors not blocked now: each of them may block once before a blocked one comes
        back, no other handling can (a fan-out of 100 calls at a time kept 100 spares
        parked beside its 100 blocked threads: 200 started)."""
        want = 0
        with self._lock:  # (asked for ahead: taken even on a look that met their poke)
            ahead, self._ahead = self._ahead, 0
            if spares:
                blocked = len(self._workers) - self._working
                want = min(blocked, self.live - blocked)
        ahead -= self._spares()  # (a number to start, not a level kept: they are taken)
        while not self._closed.is_set():
            if self._owed and self._handoff.in_line and self._pay(start=True):
                ahead -= 1  # (started for one of them)
            elif ahead > 0:
                if not self._pool.add_spare():
                    return
                ahead -= 1
            elif self._spares() >= want or not self._pool.add_spare():
                return

    def _spares(self) -> int:
        """Threads ready for a handling about to block: parked in the pool (or about to),
        and those taking work past ``size`` (back from a block, lingering: ``_leaves``)."""
        return self._pool.spares + max(0, self._working - self.size)

    def ready(self, blocking: int) -> None:
        """Have threads ready for ``blocking`` handlings about to block (a wave of runs about
        to make their model calls): the watch thread is poked to start that many spares,
        parked (up to the pool's ``max_idle``), before the handlings block, not one by one as
        each does (each start waited for the GIL twice behind the wave; on the supervisor's
        thread they held it). The caller does not wait. Spares parked that cover ``blocking``
        wake nobody: the look would start none ahead, and the rest it does is done without
        it (an owed replacement paid from the parked at ``submit`` and ``blocking``; a pool
        run dry pokes it, ``_pay``). Before, each decision starting two runs or more woke it,
        9 in 10 for nothing, taking the GIL as freed slots' next children started."""
        if not self._started:
            self._start()
        if self._spares() >= blocking:
            return
        with self._lock:
            self._ahead = max(self._ahead, blocking)
        self._poked.set()

    def _rejoin(self, worker: _Worker) -> bool:
        """A worker counted as blocked whose drain ended: back to work in the place of a
        replacement still owed (it was never started), or below ``size``; else, if its drain
        said it blocks, past ``size`` (it leaves once idle for ``LINGER_S``: ``_leaves``), up
        to the pool's ``max_idle`` past it, as the pool would keep it parked; else (or
        closing) it leaves. (A drain only found stalled, a slow handling on a loaded machine,
        does not rejoin past ``size``: each look that found every thread stalled at once
        added ``size`` threads taking work, up to ``max_idle`` past it.)"""
        said_blocks, worker.said_blocks = worker.said_blocks, False
        with self._lock:
            if self._owed and not self._closed.is_set():
                self._owed -= 1
                worker.replaced = False
                self._working += 1
                return True
            limit = self.size + self._pool.max_idle if said_blocks else self.size
            if self._working < limit and not self._closed.is_set():
                worker.replaced = False  # (past ``size``: it leaves once idle, ``_leaves``)
                self._working += 1
                return True
            return False

    def _leaves(self, worker: _Worker) -> bool:
        """``worker``, idle for ``LINGER_S``, leaves if more than ``size`` take work (counted
        out here, under the lock: two leaving at once never leave fewer than ``size``)."""
        with self._lock:
            if self._working <= self.size:
                return False
            worker.replaced = True  # (not counted out again as it leaves ``_work``)
            self._working -= 1
            return True

    def _watching(self) -> None:
        """Every ``stall_s``, and when poked (``_pay`` found no parked thread): replacements
        owed while work waits are started, spares too when poked; each thread that has been
        in one drain longer than ``stall_s`` is counted as blocked, and replaced."""
        while True:
            poked = self._poked.wait(self.stall_s)
            self._poked.clear()
            if self._closed.is_set():
                return
            try:
                self._add_spares(poked)
            except Exception:  # no thread to be had: the blocked ones will end
                log.warning("no spare thread for the dispatcher", exc_info=True)
            _ = self.live  # (folds the tallies: their deques stay short)
            now = time.monotonic()
            stalled = 0
            with self._lock:
                for worker in list(self._workers):
                    since = worker.busy_since
                    if not worker.replaced and since and now - since > self.stall_s:
                        stalled += self._replace(worker)
            for _ in range(stalled):  # (each thread started with the lock let go)
                if not self._start_owed():
                    break

    def blocking(self, worker: _Worker) -> None:
        """``worker``'s handling is about to block: it is counted as blocked at once, and
        (unless ``size`` others take work: threads back from a block, past ``size``) its
        replacement is owed, started (``_pay``) when work finds no thread waiting for it
        (now, if work is in line already). Work that does not block after all (a sync function agent
        that returns at once) then costs no thread: the worker comes back to its place."""
        pay_nudge()  # what its turn left in line is taken by another meanwhile (handoff.py)
        worker.said_blocks = True
        if worker.replaced:
            return
        with self._lock:  # (looked at again: the watch thread may have replaced it meanwhile)
            if not self._replace(worker):
                return
        if not self._handoff.waiting and self._handoff.in_line:
            self._pay()

    def unblocked(self, worker: _Worker) -> None:
        """``worker``'s handling is done blocking (``done_blocking``): it takes work again
        in the place of its replacement, if that is still owed; else it goes on as one
        replaced, rejoining or leaving when its drain ends."""
        if not worker.replaced or not self._owed:
            return
        with self._lock:
            if self._owed:
                self._owed -= 1
                worker.replaced = False
                worker.said_blocks = False  # (counted back in: no ``_rejoin`` to read it)
                self._working += 1

    # ---- state -------------------------------------------------------------------------------

    @property
    def live(self) -> int:
        """Actors started on this dispatcher and not stopped yet (pykka's ``ActorRegistry``
        does not hold them: see the module doc)."""
        stopped = self._stops.value  # first: every actor it counts was counted started
        return self._starts.value - stopped

    def _actor_started(self) -> None:
        self._starts.add()

    @property
    def stopped(self) -> int:
        """Actors stopped on this dispatcher so far (for the GC pacing: ``gc_pacing.py``)."""
        return self._stops.value

    def _actor_stopped(self) -> None:
        self._stops.add()

    def counts(self) -> DispatcherCounts:
        with self._lock:
            working = self._working
            return DispatcherCounts(working=working, replaced=len(self._workers) - working)

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no actor is in line and no thread is draining one (checked whenever a
        drain ends); False if ``timeout`` passed first."""

        def idle() -> bool:
            return not self._handoff.in_line and not any(w.busy_since for w in self._workers)

        with self._lock:
            self._idle_waiters += 1
            try:
                return self._drained.wait_for(idle, timeout)
            finally:
                self._idle_waiters -= 1

    def threads(self) -> list[threading.Thread]:
        """Every thread the dispatcher runs on now (its pool's and the watch thread)."""
        names = (self._pool.name + "-", f"{self.name}-watch")
        return [t for t in threading.enumerate() if t.name.startswith(names)]

    def close(self, timeout: float = 10.0) -> list[threading.Thread]:
        """Take no more work; end the threads once the work in line is done (up to
        ``timeout``). Returns the threads still alive then (blocked in a handling)."""
        deadline = time.monotonic() + timeout
        with self._lock:
            if self._closed.is_set():
                return []
            self._closed.set()
            self._poked.set()  # the watch thread ends now, not at its next look
        self._handoff.close()
        if self._watch is not None:
            self._watch.join(max(0.0, deadline - time.monotonic()))
        alive = self._pool.close(max(0.0, deadline - time.monotonic()))
        PACING.unregister(self)  # once its work in line is done: the stops it made counted
        return alive
