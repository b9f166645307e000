"""Tally: a count many threads add to without a lock (``actors/tally.py``)."""

from __future__ import annotations

import collections
import sys
import threading

from polling import wait_until
from subagents.actors.tally import Tally

WAIT = 60.0


def test_it_counts_what_was_added() -> None:
    tally = Tally()
    assert tally.value == 0
    for _ in range(5):
        tally.add()
    assert tally.value == 5
    tally.add()
    assert tally.value == 6


def test_many_adders_and_readers_at_once_lose_nothing_and_never_go_back() -> None:
    """Eight threads add 20,000 each while three threads read (and so fold) all the time,
    with a thread switch every microsecond: every read is at least the one before it, and
    the last read is every add."""
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    tally = Tally()
    adders, each = 8, 20_000
    go = threading.Barrier(adders + 3)
    adding = threading.Event()
    went_back: list[tuple[int, int]] = []
    failed: list[Exception] = []

    def add() -> None:
        go.wait(WAIT)
        for _ in range(each):
            tally.add()

    def read() -> None:
        go.wait(WAIT)
        last, more = 0, True
        try:
            while more:
                more = adding.is_set()  # (one read at least after the adds ended)
                now = tally.value
                if now < last:
                    went_back.append((last, now))
                last = now
        except Exception as exc:  # (a fold that popped another's: IndexError)
            failed.append(exc)

    adding.set()
    threads = [threading.Thread(target=add) for _ in range(adders)]
    readers = [threading.Thread(target=read) for _ in range(3)]
    try:
        for thread in threads + readers:
            thread.start()
        for thread in threads:
            thread.join(WAIT)
        adding.clear()
        for thread in readers:
            thread.join(WAIT)
    finally:
        sys.setswitchinterval(switch)
    assert not any(t.is_alive() for t in threads + readers)
    assert went_back == []
    assert failed == []
    assert tally.value == adders * each


class _Arrivals:
    """A tally's readers' lock, telling when a reader has come to it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.arrived = threading.Event()

    def __enter__(self) -> bool:
        self.arrived.set()
        return self.lock.acquire()

    def __exit__(self, *_: object) -> None:
        self.lock.release()


class _SecondReadWhileFolding(collections.deque[None]):
    """A tally's adds whose first fold lets a second read run on another thread (until it
    waits for the readers' lock, or is done) before the first fold takes anything out."""

    def __init__(self, tally: Tally, arrivals: _Arrivals) -> None:
        super().__init__()
        self.tally, self.arrivals = tally, arrivals
        self.second: list[object] = []
        self.thread: threading.Thread | None = None

    def popleft(self) -> None:
        if self.thread is None:
            self.arrivals.arrived.clear()  # (the first read came)

            def read() -> None:
                try:
                    self.second.append(self.tally.value)
                except Exception as exc:
                    self.second.append(exc)

            self.thread = threading.Thread(target=read)
            self.thread.start()
            wait_until(
                lambda: self.arrivals.arrived.is_set() or bool(self.second),
                "the second read waiting for the lock, or done",
            )
        super().popleft()


def test_two_reads_folding_at_once_count_each_add_once() -> None:
    """Two reads meet: the second comes while the first is folding (made certain here).
    It must wait for the first (the readers' lock), then both read 3, and so does the next
    read. Two folds at once would count the same adds twice, or pop more than there is
    (IndexError): the branch's stress test saw that variant only one run in three."""
    tally = Tally()
    arrivals = _Arrivals()
    tally._folding = arrivals  # type: ignore[assignment]
    adds = _SecondReadWhileFolding(tally, arrivals)
    tally._added = adds
    for _ in range(3):
        tally.add()
    first = tally.value
    assert adds.thread is not None
    adds.thread.join(WAIT)
    assert (first, adds.second) == (3, [3])
    assert tally.value == 3
