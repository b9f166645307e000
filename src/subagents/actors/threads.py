"""ThreadPool: parked threads that run actor loops, so starting an agent actor costs no thread.

pykka starts a new thread for every ``ThreadingActor``. For a runtime that starts thousands of
short runs, that is most of the cost of a run: ``Thread.start()`` blocks its caller (the
supervisor, which admits every run) until the new thread has signalled that it runs, and
every run's thread is torn down again at its end (figures: benchmarks/README.md). A
pooled actor keeps everything else an actor is (its own inbox, its own loop, one message at a
time); only the thread under the loop is reused. Handing a loop to a parked thread is one
``SimpleQueue.put``, and the caller does not wait for it.

Threads park for ``idle_s`` and then end, and at most ``max_idle`` stay parked, so a runtime
that was busy once does not keep its peak of threads. A loop that never returns (a sync
function agent blocked forever) holds its thread as it would hold a thread of its own; the pool
starts another thread for the next loop. ``close`` ends parked threads and joins every thread
the pool started. ``add_spare`` starts a thread ahead that parks at once, and ``try_run``
hands a job only to a parked thread: a caller that must not wait for a thread to start
(``Thread.start`` waits until the new thread runs) uses them (``pooled.Dispatcher``).

Each loop runs in a fresh ``contextvars.Context``, as it would on a new thread: context
variables one run sets (structlog's bound context, for one) never leak into the next run.
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import os
import queue
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from subagents.logs import get_logger

log = get_logger("subagents.threads")

Work = Callable[[], None]

_STOP = None


def default_size() -> int:
    """Threads that drain a dispatcher's mailboxes: two per core, at least 4 (a handling may
    wait briefly on the supervisor, so a few more threads than cores keep the cores busy)."""
    return max(4, 2 * (os.cpu_count() or 1))


class PoolClosed(RuntimeError):
    """The pool was closed: it runs nothing more."""


class NoThread(RuntimeError):
    """A dispatcher that never had a thread, or a pool with none parked, could not start one
    (the process's thread limit: ``Thread.start`` raised "can't start new thread"): the
    message put, the loop to run, was not handed on. A later try may find one (threads end);
    for good: raise the limit (``ulimit -u``) or run fewer at once."""


class InterpreterExiting(PoolClosed):
    """The interpreter is shutting down (``sys.is_finalizing()``): no thread will start in
    this process again, so nothing more runs, whatever the limit. Not ``NoThread``, which
    says a later try may succeed: this is code still starting work while the program exits
    (an object's ``__del__``, say); close the ``Runtime`` before the program ends. (Python
    3.12 raises "can't create new thread at interpreter shutdown" here; 3.11's
    ``Thread.start`` waits for ever for a thread that never runs, so the pool asks first.)"""


def _exiting(name: str) -> InterpreterExiting:
    return InterpreterExiting(
        f"{name} could not start a thread: the interpreter is shutting down "
        "(close the Runtime before the program ends)"
    )


class _Worker:
    """The slot one pooled thread is handed its next loop through."""

    __slots__ = ("jobs",)

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue[Work | None] = queue.SimpleQueue()


@dataclass(frozen=True)
class PoolCounts:
    """How many threads the pool has, and how many of them are parked."""

    parked: int
    threads: int


class ThreadPool:
    """Daemon threads that run one job each at a time and park in between."""

    def __init__(self, name: str = "subagents-agent", idle_s: float = 10.0, max_idle: int = 256):
        if idle_s <= 0:
            raise ValueError("idle_s must be positive")
        if max_idle < 0:
            raise ValueError("max_idle must be 0 or more")
        self.name = name
        self.idle_s = idle_s
        self.max_idle = max_idle
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)  # a thread parked, was taken, ended
        self._idle: list[_Worker] = []  # a stack: the thread parked last is woken first
        self._threads: set[threading.Thread] = set()
        self._closed = False
        self._numbers = itertools.count(1)
        self._coming = 0  # spare threads started and not parked yet (``add_spare``)
        self._starting = 0  # threads made and not started yet: ``close`` waits for them

    # ---- running -----------------------------------------------------------------------------

    def run(self, job: Work) -> None:
        """Run ``job`` on a parked thread, or on a new one if none is parked. Never waits.
        ``NoThread`` when none is parked and the process refuses a new one (its thread
        limit); ``InterpreterExiting`` when none is parked and the interpreter is shutting
        down (no thread will ever start again)."""
        with self._lock:
            if self._closed:
                raise PoolClosed(f"the {self.name} thread pool is closed")
            if self._idle:
                self._idle.pop().jobs.put(job)
                self._changed.notify_all()
                return
            if sys.is_finalizing():  # (before ``Thread.start``: on 3.11 it would never return)
                raise _exiting(self.name)
            worker = _Worker()
            # its first job through its slot, not the thread's args (which the thread holds
            # until it ends: an ended actor's loop would stay alive as long)
            worker.jobs.put(job)
            thread = threading.Thread(
                target=self._work,
                args=(worker,),
                name=f"{self.name}-{next(self._numbers)}",
                daemon=True,  # a program that forgets Runtime.close() must still exit
            )
            self._threads.add(thread)
            self._starting += 1
        try:
            thread.start()  # a new thread: its first job comes with it
        except BaseException as refused:  # no thread to be had (the process's limit): count none
            with self._lock:
                self._threads.discard(thread)
            if isinstance(refused, RuntimeError) and sys.is_finalizing():
                raise _exiting(self.name) from refused
            if isinstance(refused, RuntimeError):  # ("can't start new thread": named so)
                raise NoThread(
                    f"{self.name} could not start a thread (the process's thread limit): {refused}"
                ) from refused
            raise
        finally:
            self._started()

    @staticmethod
    def refuse_if_exiting(name: str) -> None:
        """``InterpreterExiting`` (naming ``name``) while the interpreter finalizes: asked
        before a ``Thread.start`` of one's own (``Dispatcher``'s watch thread), which on
        3.11 never returns then, and the exit hangs."""
        if sys.is_finalizing():
            raise _exiting(name)

    def try_run(self, job: Work) -> bool:
        """Run ``job`` on a parked thread; False, running nothing, if none is parked (the
        caller does not wait for a thread to start: ``add_spare`` starts them ahead)."""
        with self._lock:
            if self._closed:
                raise PoolClosed(f"the {self.name} thread pool is closed")
            if not self._idle:
                return False
            self._idle.pop().jobs.put(job)
            self._changed.notify_all()
            return True

    def add_spare(self) -> bool:
        """Start one thread that parks at once, for a later ``run``/``try_run`` to take
        without waiting for a thread to start (``Thread.start`` waits until the new thread
        runs: behind the GIL, milliseconds on a busy process). False, starting none, when
        the pool is closed or its parked (and coming) threads are at ``max_idle``."""
        with self._lock:
            if self._closed or len(self._idle) + self._coming >= self.max_idle:
                return False
            if sys.is_finalizing():  # (as ``run``'s)
                raise _exiting(self.name)
            self._coming += 1
            worker = _Worker()
            thread = threading.Thread(
                target=self._work,
                args=(worker, True),
                name=f"{self.name}-{next(self._numbers)}",
                daemon=True,
            )
            self._threads.add(thread)
            self._starting += 1
        try:
            thread.start()
        except BaseException as refused:
            with self._lock:
                self._threads.discard(thread)
                self._coming -= 1
            if isinstance(refused, RuntimeError) and sys.is_finalizing():
                raise _exiting(self.name) from refused
            raise
        finally:
            self._started()
        return True

    def _started(self) -> None:
        """A thread made by ``run`` or ``add_spare`` has started (or could not be)."""
        with self._lock:
            self._starting -= 1
            self._changed.notify_all()

    @property
    def spares(self) -> int:
        """Threads parked, or started as spares and about to park."""
        with self._lock:
            return len(self._idle) + self._coming

    def _work(self, worker: _Worker, spare: bool = False) -> None:
        job = self._park(worker, arriving=True) if spare else worker.jobs.get()
        try:
            while job is not None:
                try:
                    contextvars.Context().run(job)
                except BaseException:
                    log.exception("a pooled job failed", thread=threading.current_thread().name)
                job = None  # (what it held, an ended actor's loop, is not kept while it parks)
                job = self._park(worker)
        finally:
            with self._lock:
                self._threads.discard(threading.current_thread())
                self._changed.notify_all()

    def _park(self, worker: _Worker, arriving: bool = False) -> Work | None:
        """Wait for the next job; None when this thread should end. ``arriving``: a spare's
        first park (``add_spare``)."""
        with self._lock:
            if arriving:
                self._coming -= 1
            if self._closed or len(self._idle) >= self.max_idle:
                return _STOP
            self._idle.append(worker)
            self._changed.notify_all()
        try:
            return worker.jobs.get(timeout=self.idle_s)
        except queue.Empty:
            pass
        with self._lock:
            if worker in self._idle:  # nobody took it meanwhile: end
                self._idle.remove(worker)
                return _STOP
        return worker.jobs.get()  # taken just as it timed out: its job is on the way

    # ---- state -------------------------------------------------------------------------------

    @property
    def parked(self) -> int:
        """Threads waiting for a job."""
        with self._lock:
            return len(self._idle)

    @property
    def threads(self) -> int:
        """Threads alive in the pool, parked or busy."""
        with self._lock:
            return len(self._threads)

    def wait_until(self, test: Callable[[PoolCounts], bool], timeout: float) -> bool:
        """Wait until ``test(counts)`` holds (checked whenever a thread parks, is taken or
        ends); False if ``timeout`` passed first."""
        with self._changed:
            return self._changed.wait_for(lambda: test(self._counts()), timeout)

    def _counts(self) -> PoolCounts:
        return PoolCounts(parked=len(self._idle), threads=len(self._threads))

    def close(self, timeout: float = 10.0) -> list[threading.Thread]:
        """Run nothing more; end parked threads; wait up to ``timeout`` for busy ones to end.

        Returns the threads still alive at the deadline (busy with a job that did not end),
        and any a concurrent ``run`` or ``add_spare`` had made and not started by then: a
        thread not started cannot be joined, and would start (its job run) after the close
        returned had the close not waited for it."""
        deadline = time.monotonic() + timeout
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.jobs.put(_STOP)
        with self._lock:  # (nothing is made after ``_closed``: only those already made)
            self._changed.wait_for(
                lambda: not self._starting, max(0.0, deadline - time.monotonic())
            )
            threads = list(self._threads)
        for thread in threads:
            with contextlib.suppress(RuntimeError):  # not started by the deadline
                thread.join(max(0.0, deadline - time.monotonic()))
        return [t for t in threads if t.is_alive() or t.ident is None]
