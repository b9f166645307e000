"""A store this command's opening made is taken back only while it is still this command's
alone (``cli.fresh_store.FreshStore.take_back``): another process that opened the same new
path meanwhile (two `subagents run --state NEW` at once) keeps its store, whether it
recorded a run in it, holds it open, or made a new file there. Each second writer is a real
process on the real SQLite file; this command's side is the CLI's own ``FreshStore`` around a
real opening, as ``cli.runtime_args.start_runtime`` uses it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from clikit import DEADLINE_S, Cli

from held_open import held_open
from subagents.cli.fresh_store import FreshStore
from subagents.store.opening import open_location

HOLD = """
import sys
from subagents.store.opening import open_location
store = open_location(sys.argv[1])
store.list_runs(limit=1)  # (connected: SQLite reads the file, its -shm mapped and locked)
print("open", flush=True)
sys.stdin.readline()
store.close()
"""
REMAKE = """
import os, sys
from subagents.store.opening import open_location
for suffix in ("", "-wal", "-shm"):
    if os.path.exists(sys.argv[1] + suffix):
        os.unlink(sys.argv[1] + suffix)
open_location(sys.argv[1]).close()
"""


def _opened(path: Path) -> tuple[FreshStore, object]:
    """This command's side: the fresh store noted, then opened (as ``start_runtime``)."""
    fresh = FreshStore.before_opening(path)
    assert fresh is not None
    store = open_location(path)
    return fresh.opened(), store


def test_an_unused_store_it_made_is_removed_with_its_folders(tmp_path: Path) -> None:
    path = tmp_path / "state" / "deep" / "runs.sqlite3"
    fresh, store = _opened(path)
    assert fresh.take_back(store)  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


def test_a_store_another_command_ran_a_run_in_meanwhile_stays(tmp_path: Path) -> None:
    """The second writer: a real `subagents run` on the same new path, done before this
    command's refusal takes its store back (before: removed, the other's run with it)."""
    cli = Cli(tmp_path / "ws")
    path = tmp_path / "state" / "runs.sqlite3"
    fresh, store = _opened(path)
    other = cli("run", "quick", "theirs", "--agents", str(cli.agents), "--state", str(path))
    assert other.returncode == 0, other.stderr
    assert not fresh.take_back(store)  # type: ignore[arg-type]
    with open_location(path) as kept:
        assert [r.task for r in kept.list_runs()] == ["theirs"]


def test_a_store_another_process_holds_open_stays(tmp_path: Path) -> None:
    """Nothing recorded yet (a runtime still starting), but connected: its store."""
    path = tmp_path / "state" / "runs.sqlite3"
    fresh, store = _opened(path)
    with held_open(HOLD, path, timeout=DEADLINE_S):
        assert not fresh.take_back(store)  # type: ignore[arg-type]
        assert path.exists()
    assert fresh.take_back(open_location(path))  # let go of: now this command's alone
    assert list(tmp_path.iterdir()) == []


def test_a_new_store_another_process_made_at_the_path_stays(tmp_path: Path) -> None:
    path = tmp_path / "state" / "runs.sqlite3"
    fresh, store = _opened(path)
    done = subprocess.run(
        [sys.executable, "-c", REMAKE, str(path)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert not fresh.take_back(store)  # type: ignore[arg-type]  # not the file it made
    assert path.exists()
    with open_location(path) as theirs:
        assert theirs.list_runs() == []


PAUSED = """
import sqlite3, sys
from subagents.store.base import StoreError
from subagents.store.opening import open_location
connect, at = sqlite3.connect, sys.argv[2]
def paused() -> None:
    print("open", flush=True)
    sys.stdin.readline()
class FirstStatementPaused(sqlite3.Connection):
    def execute(self, *args, **kwargs):
        if at == "first statement" and not getattr(self, "went_on", False):
            self.went_on = True
            paused()
        return super().execute(*args, **kwargs)
def connected_then_paused(*args, **kwargs):
    conn = connect(*args, factory=FirstStatementPaused, **kwargs)  # the file opened
    if at == "connected":  # (before the store looks at the file it connected to)
        paused()
    return conn
sqlite3.connect = connected_then_paused
try:
    store = open_location(sys.argv[1])
except StoreError as exc:
    print("refused:", exc)
else:
    print("opened, runs:", len(store.list_runs()))
    store.close()
"""


@pytest.mark.parametrize("at", ["connected", "first statement"])
def test_a_process_that_opened_it_and_ran_no_statement_yet_is_refused_naming_it(
    tmp_path: Path, at: str
) -> None:
    """The window SQLite's locks leave: another process whose store has opened the file
    (``sqlite3.connect``) but run no statement yet holds no lock (``held_alone`` sees
    nobody), so the take-back removes the file. That process is refused, a ``StoreError``
    naming the store: right after connecting (the store finds no file where it connected:
    it was an ``AssertionError``), or at its first statement (SQLite: "disk I/O error", the
    WAL index it opens by name is not its file's). Never a silently empty store."""
    path = tmp_path / "state" / "runs.sqlite3"
    fresh, store = _opened(path)
    with held_open(PAUSED, path, at, timeout=DEADLINE_S) as told:
        assert fresh.take_back(store)  # type: ignore[arg-type]  # (no lock held: removed)
    assert told and told[-1].startswith(f"refused: {path}:"), told
    expected = "removed as it was being opened" if at == "connected" else "disk I/O error"
    assert expected in told[-1], told
    assert list(tmp_path.iterdir()) == []  # (nor did the refused one leave a file)


class _OtherRunsAsItCloses:
    """This command's real store, through which a real `subagents run` on the same path
    starts, records its run and ends in the moment this command closes it: after the
    take-back found nothing recorded, before it removes the files (a gate at that point,
    the only one a test can reach deterministically; the stores and the run are real)."""

    def __init__(self, store: object, cli: Cli, path: Path) -> None:
        self._store, self._cli, self._path = store, cli, path

    def __getattr__(self, name: str) -> object:
        return getattr(self._store, name)

    def close(self) -> None:
        self._store.close()  # type: ignore[attr-defined]
        argv = ["run", "quick", "theirs", "--agents", str(self._cli.agents)]
        other = self._cli(*argv, "--state", str(self._path))
        assert other.returncode == 0, other.stderr


def test_a_run_another_command_recorded_as_this_one_closed_stays(tmp_path: Path) -> None:
    """Before: the store was read as unused while still open, then closed and removed,
    with the other command's run recorded between the two."""
    cli = Cli(tmp_path / "ws")
    path = tmp_path / "state" / "runs.sqlite3"
    fresh, store = _opened(path)
    assert not fresh.take_back(_OtherRunsAsItCloses(store, cli, path))  # type: ignore[arg-type]
    assert not Path(f"{path}-shm").exists()  # (nor the one the take-back locked left)
    with open_location(path) as kept:
        assert [r.task for r in kept.list_runs()] == ["theirs"]
