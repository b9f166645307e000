"""Helpers for tests that need "it did not wait" without timing anything.

Why: a test that asserts ``elapsed < 1.5`` fails whenever the machine is loaded (CI runs on
two shared cores), and passes a slow implementation on a fast machine. Instead:

- ``RecordedWaits`` is a cancel signal (``threading.Event``'s ``is_set``/``wait``) that
  records every wait asked of it: the retry code waits only through its cancel signal, so a
  test reads exactly which waits were started (none, or 0.3 s, or capped at 0.01 s);
- ``finishes`` runs a call on a thread and waits for it with a generous timeout: a call that
  must be cut short is given something that would otherwise block far longer (an hour), so
  only an implementation that really cuts it short gets through.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

GENEROUS_S = 60.0
"""How long ``finishes`` waits: far more than a loaded machine needs, far less than the hour
the call would block if it were not cut short."""


class RecordedWaits:
    """A cancel signal that is never set and records the waits asked of it.

    ``really_wait``: when False, a wait returns at once (the time it asked for is recorded,
    not spent), so a test of a 30 s backoff takes no time."""

    def __init__(self, *, really_wait: bool = True) -> None:
        self.waits: list[float | None] = []
        self._event = threading.Event()
        self._really_wait = really_wait

    def is_set(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(timeout)
        if not self._really_wait:
            return self._event.is_set()
        return self._event.wait(timeout)


def finishes(call: Callable[[], T], timeout: float = GENEROUS_S) -> T:
    """``call()``'s result (or its exception, raised here) once it returns; an assertion
    error if it is still running after ``timeout`` seconds."""
    outcome: list[T] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            outcome.append(call())
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=run, name="finishes", daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), f"the call did not return within {timeout} s"
    if failure:
        raise failure[0]
    return outcome[0]
