"""``_least_waiting.py`` is the anchor of ``scale.py``'s ``spawn_many`` row: the least a
waiting run of this design does (and, told one each, the one-``spawn`` row's floor;
``_least_close.py`` the close's). Its agent actors must be made as the runtime's are (pooled,
unregistered, a ``Mailbox`` inbox) and each must really come to wait (its coroutine
suspended, not finished), and the close must really end each run, or a floor would measure
less than the design must do."""

from __future__ import annotations

import queue
import sys
from pathlib import Path
from typing import Any

import pykka

from subagents.actors.mailbox import Mailbox
from subagents.actors.pooled import Dispatcher

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
WAIT = 60.0


def _least_waiting() -> Any:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import _least_waiting as least_waiting
    finally:
        sys.path.remove(str(BENCHMARKS))
    return least_waiting


def _least_close() -> Any:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import _least_close as least_close
    finally:
        sys.path.remove(str(BENCHMARKS))
    return least_close


def test_a_least_run_is_a_pooled_unregistered_actor_whose_coroutine_waits() -> None:
    least = _least_waiting()
    seen: queue.SimpleQueue[tuple[Any, Any, Any]] = queue.SimpleQueue()

    class Looked(least._LeastAgent):  # type: ignore[misc, name-defined]
        def on_start(self) -> None:
            super().on_start()
            registered = pykka.ActorRegistry.get_by_urn(self.actor_urn)
            seen.put((registered, self.actor_inbox, self._coro))

    dispatcher = Dispatcher(size=1)
    supervisor: queue.SimpleQueue[Any] = queue.SimpleQueue()
    try:
        ref = Looked.start(supervisor, "r-1", "t", dispatcher=dispatcher)
        assert supervisor.get(timeout=WAIT) == ("waiting", "r-1")
        registered, inbox, coro = seen.get(timeout=WAIT)
        assert registered is None  # the runtime's pooled agent actors are never registered
        assert type(inbox) is Mailbox
        assert coro is not None and coro.cr_suspended  # it waits: not run to its end
        ref.stop(timeout=WAIT)
        assert coro.cr_frame is None  # closed with its actor
    finally:
        dispatcher.close(WAIT)


def test_least_waiting_counts_every_run_of_every_batch() -> None:
    least = _least_waiting()
    result = least.least_waiting(25, 10, timeout=WAIT)
    assert (result["n"], result["batch"]) == (25, 10)  # a last batch of 5 included
    assert result["start_cpu_s"] >= 0 and result["cpu_us_per_run"] >= 0


def test_decisions_alone_decides_every_run_waiting() -> None:
    least = _least_waiting()
    result = least.decisions_alone(250, 100)  # raises unless the first and last wait
    assert result["n"] == 250 and result["start_cpu_s"] >= 0


def test_least_waiting_told_one_each_makes_every_run_without_answering() -> None:
    least = _least_waiting()
    result = least.least_waiting(25, 10, timeout=WAIT, one_each=True)  # raises unless 25 wait
    assert (result["n"], result["batch"], result["told"]) == (25, 1, "one each, unanswered")


def test_the_least_close_ends_every_run_records_it_and_closes_its_coroutine() -> None:
    least, closing = _least_waiting(), _least_close()
    seen: list[Any] = []

    def close(supervisor: Any, dispatcher: Dispatcher, n: int, timeout: float) -> Any:
        coros = [ref.actor_inbox._actor._coro for ref in supervisor.actors.values()]
        figures = closing.least_close(supervisor, dispatcher, n, timeout)
        ended = (dict(supervisor.records), list(supervisor.ends), supervisor.actors)
        seen.append((coros, *ended, list(getattr(supervisor, "events", ()))))
        return figures

    result = least.least_waiting(30, 7, timeout=WAIT, close=close)
    closed = result["close"]
    assert closed["n"] == 30 and closed["close_s"] >= 0 and closed["close_cpu_s"] >= 0
    coros, records, ends, actors, events = seen[0]
    assert len(coros) == 30 and all(c.cr_frame is None for c in coros)  # each actor stopped
    assert {r.status for r in records.values()} == {"cancelled"}  # each record ended
    assert sorted(e.run_id for e in ends) == sorted(records) and not actors  # each end kept
    # and its end event, as the store keeps each run's (``cancelled``): a floor without it
    # does less than the design promises (every run's end recorded as an event)
    assert sorted(e.run_id for e in events) == sorted(records)
    assert {e.kind for e in events} == {"cancelled"} and all(e.ts > 0 for e in events)
