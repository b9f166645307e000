"""``about_to_block()``: code that is about to wait says so, and the thread pool it runs on
puts another thread to work at once.

Why: agent actors are drained by a few shared dispatcher threads (``actors/pooled.py``), and
a handling that waits (a model call over the network, a tool's subprocess, a sync function
agent) keeps its thread from every other actor. The dispatcher finds such threads by
looking every ``stall_s``, which is slow when many handlings block at once: a fan-out of
1,000 children whose model calls each take 50 ms started only a few of them per look. Code
that *knows* it will wait calls ``about_to_block()`` first, and its thread is replaced right
away (Java's ``ForkJoinPool.managedBlock`` and Scala's ``blocking { }`` do the same).

This module is at the bottom of the layers (no imports of the project): models, tools and
behaviours call it without knowing about threads; on a thread no pool has hooked (an actor
with a thread of its own, a program's own thread), it does nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

_here = threading.local()


def about_to_block() -> None:
    """The current thread is about to wait (I/O, a subprocess, a sleep, user code that may
    block): let the pool it belongs to, if any, put another thread to work in its place."""
    hook: Callable[[], None] | None = getattr(_here, "hook", None)
    if hook is not None:
        hook()


def set_hook(hook: Callable[[], None] | None) -> None:
    """What ``about_to_block()`` calls on the current thread (None: nothing). A pool sets it
    on each of its threads while they work for it."""
    _here.hook = hook
