"""``about_to_block()``: code that is about to wait says so, and the thread pool it runs on
puts another thread to work at once.

Why: agent actors are drained by a few shared dispatcher threads (``actors/pooled.py``), and
a handling that waits (a model call over the network, a tool's subprocess, a sync function
agent) keeps its thread from every other actor. The dispatcher finds such threads by
looking every ``stall_s``, which is slow when many handlings block at once: a fan-out of
1,000 children whose model calls each take 50 ms started only a few of them per look. Code
that *knows* it will wait calls ``about_to_block()`` first, and its thread is replaced right
away (Java's ``ForkJoinPool.managedBlock`` and Scala's ``blocking { }`` do the same).

The replacement is owed, not started, until work finds no idle thread to take it; code that
may or may not wait (a sync function agent) runs inside ``blocking()``, which says when the
wait is over (``done_blocking()``), so one that returns at once costs no thread at all.

This module is at the bottom of the layers (no imports of the project): models, tools and
behaviours call it without knowing about threads; on a thread no pool has hooked (an actor
with a thread of its own, a program's own thread), it does nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager

_here = threading.local()


def about_to_block() -> None:
    """The current thread is about to wait (I/O, a subprocess, a sleep, user code that may
    block): let the pool it belongs to, if any, put another thread to work in its place."""
    hook: Callable[[], None] | None = getattr(_here, "hook", None)
    if hook is not None:
        hook()


def done_blocking() -> None:
    """What ``about_to_block`` announced is over: the pool may count this thread as taking
    work again (if the replacement it owed was not started yet, none is)."""
    done: Callable[[], None] | None = getattr(_here, "done", None)
    if done is not None:
        done()


class _Blocking:
    """``blocking()``'s context manager: a class (a generator context manager costs a
    generator and its frame per use, and a sync function agent's every start uses one)."""

    __slots__ = ()

    def __enter__(self) -> None:
        about_to_block()

    def __exit__(self, *exc: object) -> None:
        done_blocking()


_BLOCKING = _Blocking()


def blocking() -> AbstractContextManager[None]:
    """``about_to_block()`` before the block, ``done_blocking()`` after it: for code that
    may or may not wait (a sync function agent), so that one that returns at once costs the
    pool no thread."""
    return _BLOCKING


def set_hook(hook: Callable[[], None] | None, done: Callable[[], None] | None = None) -> None:
    """What ``about_to_block()`` (and ``done_blocking()``) call on the current thread (None:
    nothing). A pool sets them on each of its threads while they work for it."""
    _here.hook = hook
    _here.done = done
