"""Hot reload with real threads, real files and the one shared TimerService."""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from subagents.actors.registry import RegistryClient
from subagents.actors.timer import TimerService
from subagents.definitions import DefinitionLoader, default_sources
from subagents.definitions.catalog import Catalog, Changes

WAIT = 60.0
POLL = 0.02


def md(name: str, description: str) -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\nYou are {name}.\n"


def put(path: Path, text: str | bytes) -> None:
    """Write atomically, as editors do: a poll never sees a half-written file."""
    tmp = path.with_name(path.name + ".tmp")
    if isinstance(text, bytes):
        tmp.write_bytes(text)
    else:
        tmp.write_text(text)
    os.replace(tmp, path)


@pytest.fixture
def timer() -> Iterator[TimerService]:
    t = TimerService()
    yield t
    t.stop()


@pytest.fixture
def defs(tmp_path: Path) -> Path:
    d = tmp_path / "defs"
    d.mkdir()
    (d / "a.md").write_text(md("alpha", "First"))
    (d / "b.md").write_text(md("beta", "Second"))
    return d


def start(tmp_path: Path, defs: Path, timer: TimerService) -> RegistryClient:
    (tmp_path / "cwd").mkdir(exist_ok=True)
    (tmp_path / "home").mkdir(exist_ok=True)
    loader = DefinitionLoader(
        default_sources(
            cwd=tmp_path / "cwd", dirs=(defs,), home=tmp_path / "home", include_builtin=False
        )
    )
    return RegistryClient.start(Catalog(loader), timer=timer, timeout=WAIT)


def next_change(changes: queue.Queue[Changes]) -> Changes:
    try:
        return changes.get(timeout=WAIT)
    except queue.Empty:
        raise AssertionError(f"no change reported within {WAIT} s") from None


def test_hot_reload_picks_up_added_changed_and_removed_files(
    tmp_path: Path, defs: Path, timer: TimerService
) -> None:
    registry = start(tmp_path, defs, timer)
    changes: queue.Queue[Changes] = queue.Queue()
    registry.subscribe(changes.put)
    threads_before = threading.active_count()
    try:
        registry.start_hot_reload(POLL)

        put(defs / "c.md", md("gamma", "Third"))
        assert next_change(changes) == Changes(added=("gamma",))
        assert registry.get("gamma").description == "Third"

        put(defs / "b.md", md("beta", "Second, rewritten"))
        assert next_change(changes) == Changes(changed=("beta",))
        assert registry.get("beta").description == "Second, rewritten"

        (defs / "a.md").unlink()
        assert next_change(changes) == Changes(removed=("alpha",))
        assert registry.names() == ("beta", "gamma")

        # no thread per file or per poll: the timer's thread does the polling
        assert threading.active_count() == threads_before
    finally:
        registry.stop()
    assert timer.pending() == 0


def test_a_bad_file_during_hot_reload_loses_nothing(
    tmp_path: Path, defs: Path, timer: TimerService
) -> None:
    registry = start(tmp_path, defs, timer)
    changes: queue.Queue[Changes] = queue.Queue()
    registry.subscribe(changes.put)
    try:
        registry.start_hot_reload(POLL)
        put(defs / "bad.md", b"\x00\x01binary\xff")
        put(defs / "d.md", md("delta", "Fourth"))
        assert next_change(changes) == Changes(added=("delta",))
        assert registry.names() == ("alpha", "beta", "delta")
        assert registry.stats().issues >= 1
    finally:
        registry.stop()


def test_a_raising_subscriber_does_not_stop_hot_reload(
    tmp_path: Path, defs: Path, timer: TimerService
) -> None:
    registry = start(tmp_path, defs, timer)
    changes: queue.Queue[Changes] = queue.Queue()

    def broken(_: Changes) -> None:
        raise RuntimeError("subscriber bug")

    registry.subscribe(broken)
    registry.subscribe(changes.put)
    try:
        registry.start_hot_reload(POLL)
        put(defs / "c.md", md("gamma", "Third"))
        assert next_change(changes) == Changes(added=("gamma",))
        put(defs / "d.md", md("delta", "Fourth"))
        assert next_change(changes) == Changes(added=("delta",))
        assert registry.alive
    finally:
        registry.stop()


def test_stop_hot_reload_stops_polling(tmp_path: Path, defs: Path, timer: TimerService) -> None:
    registry = start(tmp_path, defs, timer)
    changes: queue.Queue[Changes] = queue.Queue()
    registry.subscribe(changes.put)
    try:
        registry.start_hot_reload(60)
        registry.start_hot_reload(60)  # restarting keeps one timer for the registry
        assert timer.pending() == 1
        registry.start_hot_reload(POLL)
        put(defs / "c.md", md("gamma", "Third"))
        assert next_change(changes) == Changes(added=("gamma",))
        registry.stop_hot_reload()
        # a tick already in the mailbox is dropped (its generation is over): nothing pending
        assert timer.pending() == 0
        (defs / "c.md").unlink()
        # no poll any more: the removal is only seen when asked
        assert registry.has("gamma")
        assert registry.reload() == Changes(removed=("gamma",))
    finally:
        registry.stop()
