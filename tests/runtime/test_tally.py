"""Tally: a count many threads add to without a lock (``actors/tally.py``)."""

from __future__ import annotations

import sys
import threading

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
