"""actors/group_linger.py: which of the supervisor's open groups may wait for more before
their commit, and the timer that ends the wait. Real parts: a SQLite file, the timer
service's thread, a pykka actor told when the group is due."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pykka
import pytest

from subagents.actors.group_linger import COMMIT_DUE, GroupLinger
from subagents.actors.timer import TimerService
from subagents.messages import Event, EventKind
from subagents.store.memory import MemoryStore
from subagents.store.sqlite import SQLiteStore
from subagents.supervision.effects import Publish, Tell

from .conftest import WAIT


class _Due(pykka.ThreadingActor):
    def __init__(self, due: threading.Event) -> None:
        super().__init__()
        self.due = due

    def on_receive(self, message: Any) -> None:
        if message is COMMIT_DUE:
            self.due.set()


@pytest.fixture
def parts() -> Iterator[tuple[TimerService, pykka.ActorRef[Any], threading.Event]]:
    timer, due = TimerService(), threading.Event()
    ref = _Due.start(due)
    yield timer, ref, due
    ref.stop()
    timer.stop()


def _event() -> Event:
    return Event(kind=EventKind.MAIL_SENT, run_id="r1", agent="a", root_run_id="r1", ts=1.0)


def test_a_group_of_publications_lingers_until_told_unless_it_holds_the_write_lock(
    tmp_path: Path, parts: tuple[TimerService, pykka.ActorRef[Any], threading.Event]
) -> None:
    timer, ref, due = parts
    store = SQLiteStore(tmp_path / "runs.db")
    try:
        linger = GroupLinger(timer, ref, store)
        publish = [Publish(event=_event())]
        with store.batch():
            store.append_event(_event())  # held: the group has taken no lock
            assert linger.defer(publish)
            assert due.wait(WAIT), "the lingering group was never told to commit"
            assert not linger.defer([*publish, Tell(run_id="r1", message="x")])
            store.list_runs()  # a read: the group's transaction has begun, the lock held
            assert not linger.defer(publish), "a group holding the write lock lingered"
        assert linger.defer(publish)  # a new group, holding nothing yet
    finally:
        store.close()


def test_in_memory_nothing_lingers(
    parts: tuple[TimerService, pykka.ActorRef[Any], threading.Event],
) -> None:
    timer, ref, _ = parts
    assert not GroupLinger(timer, ref, MemoryStore()).defer([Publish(event=_event())])
