"""The write-ahead log checkpointed from a thread of its own (``store.sqlite_wal``), not by
the commit that makes it long: started by a runtime whose senders record their mail,
stopped with it."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

from subagents.behaviour.function import AgentContext
from subagents.runtime import Runtime
from subagents.store.sqlite import SQLiteStore
from subagents.store.sqlite_wal import (
    BACKSTOP_PAGES,
    DEFAULT_PAGES,
    IDLE_S,
    INTERVAL_S,
    LOG_LIMIT_BYTES,
    CheckpointPacing,
    WalCheckpointer,
)

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


def test_the_thread_runs_while_any_of_its_users_does(tmp_path: Path) -> None:
    """Two runtimes on one store share the thread: the first to close does not stop it
    under the other, and a runtime started after another closed gets it again (the store's
    automatic checkpoint stays the backstop meanwhile)."""
    with SQLiteStore(tmp_path / "runs.db") as store:
        first = store.checkpoint_in_background()
        second = store.checkpoint_in_background()
        first()
        first()  # (once per user)
        assert len(checkpointers()) == 1 and autocheckpoint(store) == BACKSTOP_PAGES
        second()
        assert checkpointers() == [] and autocheckpoint(store) == DEFAULT_PAGES
        seen: list[int] = []

        async def look(ctx: AgentContext) -> str:
            seen.append(len(checkpointers()))
            return "ok"

        for _ in range(2):  # one runtime after another on the same store
            with Runtime({"look": look}, store=store) as rt:
                assert rt.run("look", "x", wait=WAIT).result == "ok"
        assert seen == [1, 1]
        assert checkpointers() == []


def test_a_resting_thread_rests_longer_while_nothing_is_written() -> None:
    pacing = CheckpointPacing()
    assert pacing.after(0, 0) == INTERVAL_S  # first look
    rests = [pacing.after(0, 0) for _ in range(10)]  # nothing written since
    assert rests[0] == 2 * INTERVAL_S and rests[-1] == IDLE_S and rests == sorted(rests)
    assert pacing.after(7, 0) == INTERVAL_S  # written: at once back to the short rest
    assert pacing.after(7, 7) == INTERVAL_S  # copied now (not yet a pass with nothing)
    assert pacing.after(7, 7) == 2 * INTERVAL_S
    assert pacing.after(9, 4) == INTERVAL_S  # a reader held some back: more to copy
    assert pacing.after(9, 4) == INTERVAL_S
    assert pacing.failed() == 2 * INTERVAL_S  # a failing disk is not hammered
    assert [pacing.failed() for _ in range(10)][-1] == IDLE_S


_FULL_DISK = """
import json, resource, signal, sqlite3, sys, threading, time
from pathlib import Path
from subagents.store.sqlite import SQLiteStore

path = Path(sys.argv[1])
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG)
store = SQLiteStore(path)
other = sqlite3.connect(path, isolation_level=None)
other.execute("PRAGMA wal_autocheckpoint = 0")  # the log holds them all
other.execute("CREATE TABLE filler (x BLOB)")
for _ in range(500):
    other.execute("INSERT INTO filler VALUES (zeroblob(4096))")
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (1_000_000, hard))  # no room for the copy
stop = store.checkpoint_in_background()
tick = threading.Event()
deadline = time.monotonic() + 30
while path.stat().st_size < 1_000_000 and time.monotonic() < deadline:
    tick.wait(0.01)  # a checkpoint tried, and failed at the limit
full = path.stat().st_size
resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))  # room again
deadline = time.monotonic() + 30
while path.stat().st_size < 2_000_000 and time.monotonic() < deadline:
    tick.wait(0.01)
print(json.dumps({"full": full, "after": path.stat().st_size}))
other.close()
stop()
store.close()
"""


def test_a_checkpoint_that_fails_is_tried_again_once_the_disk_has_room(tmp_path: Path) -> None:
    """A pass that fails (here: the file may not grow, as on a full disk) does not end the
    thread: once there is room, the log is checkpointed again (not only by the backstop,
    at 10,000 pages, in some sender's commit). A process of its own: the file size limit
    is the process's."""
    path = tmp_path / "runs.db"
    done = subprocess.run(
        [sys.executable, "-c", _FULL_DISK, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    sizes = json.loads(done.stdout.strip().splitlines()[-1])
    assert sizes["full"] < 1_500_000  # the copy stopped at the limit
    assert sizes["after"] >= 2_000_000, done.stderr  # and was made once there was room


class StalledPasses:
    """The thread's own connection (a real one) whose passes stall, once ``stall`` is set,
    until ``release`` is: a pass over a big log on a loaded disk, as long as the test wants.
    SQLite calls the progress handler between the statement's steps; while it waits there
    the pass does not end (an interrupt is seen only once it returns)."""

    def __init__(self) -> None:
        self.stall = threading.Event()
        self.stalled = threading.Event()
        self.release = threading.Event()

    def connect(self, path: Path, busy_timeout: float) -> sqlite3.Connection:
        conn = sqlite3.connect(path, timeout=busy_timeout, isolation_level=None)
        conn.set_progress_handler(self._step, 1)
        return conn

    def _step(self) -> int:
        if self.stall.is_set():
            self.stalled.set()
            self.release.wait(WAIT * 4)
        return 0


def test_a_stop_waits_for_a_stalled_pass_no_longer_than_its_timeout(tmp_path: Path) -> None:
    """A runtime's close gives the log's thread what is left of its timeout: a pass that
    does not end by then is interrupted, and if it still does not end, left to end by itself
    (a daemon, stopped, on its own connection) rather than holding the close for ever."""
    passes = StalledPasses()
    with SQLiteStore(tmp_path / "runs.db") as store:
        wal = WalCheckpointer(store.path, 5.0, store._tx, connect=passes.connect)
        stop = wal.start()
        passes.stall.set()
        try:
            assert passes.stalled.wait(WAIT)  # the thread is inside a pass
            returned = threading.Event()

            def close() -> None:
                stop(0.2)
                returned.set()

            threading.Thread(target=close, daemon=True).start()
            assert returned.wait(WAIT)  # while the pass is still stalled
            assert wal.lingering == 1 and len(checkpointers()) == 1
            assert autocheckpoint(store) == DEFAULT_PAGES  # SQLite's own again meanwhile
        finally:
            passes.release.set()
        for thread in checkpointers():
            thread.join(WAIT)
        assert checkpointers() == []  # it ended by itself once its pass did


def wal_size(path: Path) -> int:
    log_file = path.with_name(path.name + "-wal")
    return log_file.stat().st_size if log_file.exists() else 0


def grown_then_started_over(path: Path, pages: int) -> tuple[int, int]:
    """A reader holds the checkpoints back while the store writes ``pages`` of 4 KB: the
    log grows. Once the reader is gone and the thread has checkpointed it all, the store's
    next commit starts the log over. The log's size (grown, after that commit)."""
    with SQLiteStore(path) as store:
        stop = store.checkpoint_in_background()
        reader = sqlite3.connect(path, isolation_level=None)
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM sqlite_master").fetchone()  # its snapshot
        with store._tx.lock:
            conn = store._tx.connection()
            conn.execute("CREATE TABLE filler (x BLOB)")
            conn.execute("BEGIN")
            conn.executemany("INSERT INTO filler VALUES (zeroblob(4096))", [()] * pages)
            conn.execute("COMMIT")
        grown = wal_size(path)
        reader.execute("COMMIT")
        reader.close()
        passes = store._wal.passes
        deadline = time.monotonic() + WAIT
        tick = threading.Event()  # never set: a wait between looks
        while store._wal.passes < passes + 2 and time.monotonic() < deadline:
            tick.wait(0.01)  # (the second pass began after the reader had gone)
        assert store._wal.passes >= passes + 2
        with store._tx.lock:
            store._tx.connection().execute("INSERT INTO filler VALUES (zeroblob(16))")
        after = wal_size(path)
        stop()
    return grown, after


def test_a_log_that_grew_long_is_trimmed_once_checkpointed(tmp_path: Path) -> None:
    """A log grown past ``LOG_LIMIT_BYTES`` (by ~4 MB) is truncated to it when it starts over
    (without the limit SQLite reuses the file at its largest for good)."""
    grown, after = grown_then_started_over(tmp_path / "runs.db", LOG_LIMIT_BYTES // 4096 + 1_000)
    assert grown > LOG_LIMIT_BYTES + 2 * 1024 * 1024
    assert after <= LOG_LIMIT_BYTES < grown


def test_a_log_as_long_as_a_busy_store_writes_between_passes_is_reused(tmp_path: Path) -> None:
    """A durable ping-pong writes ~10 MB of log per ``INTERVAL_S`` (~8 pages of 4 KB per
    mail, ~6,000 mails/s): a log that long starts over in place, not cut and grown again
    through newly allocated blocks at every start over (4 MB, the limit before, cut it:
    the sender's record paid ~10-20 us more CPU per commit)."""
    grown, after = grown_then_started_over(tmp_path / "runs.db", 10 * 1024 * 1024 // 4096)
    assert grown > 10 * 1024 * 1024
    assert after >= grown


def test_a_runtime_that_fails_to_start_leaves_no_checkpointer(tmp_path: Path) -> None:
    """Its construction fails after the supervisor (and the log's thread) started: the
    close it makes on the way out stops the thread too; the store stays the caller's."""

    async def look(ctx: AgentContext) -> str:
        return "ok"

    with SQLiteStore(tmp_path / "runs.db") as store:
        try:
            Runtime({"look": look}, store=store, sweep_every_s="x")  # type: ignore[arg-type]
        except ValueError as exc:
            assert "sweep_every_s" in str(exc)
        else:
            raise AssertionError("a bad sweep_every_s was taken")
        assert checkpointers() == []
        assert autocheckpoint(store) == DEFAULT_PAGES
