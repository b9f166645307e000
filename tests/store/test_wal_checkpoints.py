"""The write-ahead log checkpointed from a thread of its own (``store.sqlite_wal``), not by
the commit that makes it long: started by a runtime whose senders record their mail,
stopped with it."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

from subagents.behaviour.function import AgentContext
from subagents.runtime import Runtime
from subagents.store.sqlite import SQLiteStore
from subagents.store.sqlite_wal import BACKSTOP_PAGES, DEFAULT_PAGES

NAME = "subagents-wal-checkpoint"
WAIT = 30.0


def autocheckpoint(store: SQLiteStore) -> int:
    with store._tx.lock:
        (pages,) = store._tx.connection().execute("PRAGMA wal_autocheckpoint").fetchone()
    return int(pages)


def checkpointers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == NAME and t.is_alive()]


def test_the_log_is_moved_into_the_database_by_the_thread(tmp_path: Path) -> None:
    """With the store's own automatic checkpoint far off (the backstop), pages written reach
    the database file only by the thread's checkpoints."""
    path = tmp_path / "runs.db"
    with SQLiteStore(path) as store:
        stop = store.checkpoint_in_background()
        assert autocheckpoint(store) == BACKSTOP_PAGES
        before = path.stat().st_size
        conn = sqlite3.connect(path, isolation_level=None)  # ~2 MB: far below the backstop
        conn.execute("CREATE TABLE filler (x BLOB)")
        for _ in range(500):
            conn.execute("INSERT INTO filler VALUES (zeroblob(4096))")
        conn.close()  # (not the last connection: closing it checkpoints nothing)
        deadline = time.monotonic() + WAIT
        tick = threading.Event()  # never set: a wait between looks at the file
        while path.stat().st_size < before + 2_000_000 and time.monotonic() < deadline:
            tick.wait(0.01)
        assert path.stat().st_size >= before + 2_000_000
        stop()
        assert checkpointers() == []
        assert autocheckpoint(store) == DEFAULT_PAGES  # SQLite's own again
        stop()  # again: nothing


def test_closing_the_store_stops_its_thread(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    store.checkpoint_in_background()
    store.checkpoint_in_background()  # once
    assert len(checkpointers()) == 1
    store.close()
    assert checkpointers() == []
    store.checkpoint_in_background()()  # a closed store's: nothing started, nothing raised
    assert checkpointers() == []


def test_a_runtime_checkpoints_in_the_background_while_it_runs(tmp_path: Path) -> None:
    seen: list[int] = []

    async def look(ctx: AgentContext) -> str:
        seen.append(len(checkpointers()))
        return "ok"

    with SQLiteStore(tmp_path / "runs.db") as store:
        with Runtime({"look": look}, store=store) as rt:
            assert rt.run("look", "x", wait=WAIT).result == "ok"
        assert seen == [1]
        assert checkpointers() == []  # gone with the runtime; the store stays open
        assert autocheckpoint(store) == DEFAULT_PAGES
