"""Endings: waiting for any run to end (or for all of some runs), child or root.

Why beside ``_root_waiters.py`` and not in it: the outcome of a root run is told to the runtime (its
requester), but a child's goes to its parent, never to the outside. What the outside can
always see is the terminal event every run publishes once, after the transaction that keeps
its outcome has committed. So a waiter registers the runs it waits on, reads the store for
those already ended (an ending before the registration is committed, so it is read there;
one after it wakes the waiter), and sleeps until one of them publishes its end.

Runs another runtime hosts on the same store publish nothing here: the waiter also reads
the store again every ``POLL_S`` seconds, so it sees them end too, only later.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

from subagents.messages import Event, EventKind, Outcome, RunRecord

END_KINDS = frozenset(
    {
        EventKind.COMPLETED,
        EventKind.FAILED,
        EventKind.CANCELLED,
        EventKind.TIMED_OUT,
        EventKind.BUDGET_EXCEEDED,
    }
)

POLL_S = 1.0
"""How often a waiter reads the store again (for runs hosted by another runtime)."""


class _Watch:
    __slots__ = ("ended", "wake")

    def __init__(self) -> None:
        self.wake = threading.Event()
        self.ended: list[str] = []


class Endings:
    """The callers waiting for runs to end, woken by the runs' terminal events."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._watches: dict[str, list[_Watch]] = {}

    def on_event(self, event: Event) -> None:
        """Subscribed to the runtime's events (on the supervisor's thread: quick)."""
        if not self._watches or event.kind not in END_KINDS:
            return
        with self._lock:
            watches = self._watches.get(event.run_id, ())
            for watch in watches:
                watch.ended.append(event.run_id)
                watch.wake.set()

    def wait(
        self,
        run_ids: Sequence[str],
        timeout: float | None,
        read: Callable[[str], RunRecord | None],
        *,
        every: bool,
    ) -> dict[str, Outcome]:
        """The outcomes of the runs of ``run_ids`` that have ended: as soon as one has
        (``every`` False) or all have (``every`` True), or what ended within ``timeout``
        seconds (None: no limit). ``LookupError`` for a run the store does not know.

        In the order they were found ended: those already ended when the call came in, in
        the order of ``run_ids``; then those that ended while it waited, as they ended."""
        watch = _Watch()
        with self._lock:
            for run_id in run_ids:
                self._watches.setdefault(run_id, []).append(watch)
        try:
            deadline = None if timeout is None else time.monotonic() + timeout
            ended: dict[str, Outcome] = {}
            pending = list(run_ids)
            unknown_ok = False
            while True:
                watch.wake.clear()
                with self._lock:  # the order they were seen to end in, then the rest
                    order = list(dict.fromkeys([*watch.ended, *pending]))
                for run_id in order:
                    if run_id in ended:
                        continue
                    record = read(run_id)
                    if record is None:
                        if unknown_ok:
                            continue
                        raise LookupError(f"no run with id {run_id!r}")
                    if record.status.terminal:
                        ended[run_id] = _outcome(record)
                unknown_ok = True  # known at the first read: a later miss is a sweep
                pending = [r for r in pending if r not in ended]
                if (ended and not every) or not pending:
                    return ended
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return ended
                watch.wake.wait(POLL_S if left is None else min(POLL_S, left))
        finally:
            with self._lock:
                for run_id in run_ids:
                    watches = self._watches.get(run_id)
                    if watches is None:
                        continue
                    watches[:] = [w for w in watches if w is not watch]
                    if not watches:
                        del self._watches[run_id]


def _outcome(record: RunRecord) -> Outcome:
    """An ended run's outcome (a record kept without one: its status, nothing more)."""
    if record.outcome is not None:
        return record.outcome
    return Outcome(
        run_id=record.run_id, status=record.status, usage=record.usage, steps=record.steps
    )
