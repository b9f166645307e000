"""LatchFuture keeps pykka's ThreadingFuture semantics on one lock."""

from __future__ import annotations

import queue
import threading
from typing import Any

import pykka
import pytest

from subagents.actors.inbox import FastInboxActor
from subagents.actors.latch_future import LatchFuture

WAIT = 60.0


def test_a_result_set_later_reaches_a_waiting_get_and_every_later_get() -> None:
    future: LatchFuture[int] = LatchFuture()
    got: list[int] = []
    waiting = threading.Event()

    def getter() -> None:
        waiting.set()
        got.append(future.get(timeout=WAIT))

    thread = threading.Thread(target=getter)
    thread.start()
    assert waiting.wait(WAIT)
    future.set(7)
    thread.join(WAIT)
    assert got == [7]
    assert future.get() == 7
    assert future.get(timeout=0) == 7


def test_get_times_out_as_pykka_does() -> None:
    future: LatchFuture[int] = LatchFuture()
    with pytest.raises(pykka.Timeout):
        future.get(timeout=0)
    with pytest.raises(pykka.Timeout):
        future.get(timeout=-1)
    future.set(1)
    assert future.get(timeout=0) == 1


def test_an_exception_is_raised_by_every_get() -> None:
    future: LatchFuture[int] = LatchFuture()
    try:
        raise ValueError("nope")
    except ValueError:
        future.set_exception()
    for _ in range(2):
        with pytest.raises(ValueError, match="nope"):
            future.get(timeout=0)


def test_a_second_result_is_refused() -> None:
    future: LatchFuture[int] = LatchFuture()
    future.set(1)
    with pytest.raises(queue.Full):
        future.set(2)
    with pytest.raises(queue.Full):
        future.set_exception((ValueError, ValueError("x"), None))
    assert future.get(timeout=0) == 1


def test_racing_sets_one_wins() -> None:
    for _ in range(100):
        future: LatchFuture[int] = LatchFuture()
        start = threading.Barrier(2)
        refused: list[int] = []

        def setter(
            value: int,
            f: LatchFuture[int] = future,
            b: threading.Barrier = start,
            out: list[int] = refused,
        ) -> None:
            b.wait(WAIT)
            try:
                f.set(value)
            except queue.Full:
                out.append(value)

        threads = [threading.Thread(target=setter, args=(v,)) for v in (1, 2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(WAIT)
        assert len(refused) == 1
        assert future.get(timeout=0) == 3 - refused[0]


def test_map_join_filter_reduce_work_on_it() -> None:
    a: LatchFuture[int] = LatchFuture()
    b: LatchFuture[int] = LatchFuture()
    doubled = a.map(lambda v: v * 2)
    joined = a.join(b)
    a.set(3)
    b.set(4)
    assert doubled.get(timeout=WAIT) == 6
    assert joined.get(timeout=WAIT) == [3, 4]
    items: LatchFuture[list[int]] = LatchFuture()
    items.set([1, 2, 3, 4])
    assert items.filter(lambda v: v % 2 == 0).get(timeout=WAIT) == [2, 4]
    assert items.reduce(lambda x, y: x + y).get(timeout=WAIT) == 10
    assert pykka.get_all([a, b], timeout=WAIT) == [3, 4]


class _Asked(FastInboxActor):
    def on_receive(self, message: Any) -> Any:
        if message == "fail":
            raise RuntimeError("failed on purpose")
        return message * 2


def test_asks_of_the_runtimes_actors_go_through_it() -> None:
    ref = _Asked.start()
    try:
        future = ref.ask(21, block=False)
        assert isinstance(future, LatchFuture)
        assert future.get(timeout=WAIT) == 42
        with pytest.raises(RuntimeError, match="failed on purpose"):
            ref.ask("fail", timeout=WAIT)
    finally:
        ref.stop(block=True, timeout=WAIT)
    with pytest.raises(pykka.ActorDeadError):
        ref.ask(1, timeout=WAIT)
