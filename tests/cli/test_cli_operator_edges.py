"""The operator's commands at their edges: a reader that leaves the pipe early, odd times,
a damaged store; each through the real command in a subprocess, on a real store file."""

from __future__ import annotations

import array
import subprocess
from pathlib import Path

import msgspec
import pytest
from clikit import DEADLINE_S, Cli, by_agent
from test_cli_operator import Lines

from subagents.messages import Event, EventKind
from subagents.store.sqlite import SQLiteStore

EVENTS = 3000
"""Enough event lines (each well over 100 bytes) to fill any pipe's buffer: the command is
still writing when the reader has gone."""


@pytest.fixture
def busy(tmp_path: Path) -> Cli:
    """A store holding many events of one run, written by the store itself."""
    cli = Cli(tmp_path)
    cli.state.parent.mkdir(parents=True, exist_ok=True)
    with SQLiteStore(cli.state) as store, store.batch():
        for n in range(EVENTS):
            data = {"step": n, "note": "x" * 100}
            store.append_event(
                Event(kind=EventKind.STEP, run_id="r1", agent="a", root_run_id="r1", data=data)
            )
    return cli


@pytest.mark.parametrize("as_json", [False, True], ids=["lines", "json"])
def test_events_into_a_pipe_its_reader_closed_exits_0_quietly(busy: Cli, as_json: bool) -> None:
    """`subagents events | head -1`: the reader leaving is not the command failing."""
    args = ["events", "--no-follow", "--since", "1d", *(["--json"] if as_json else [])]
    proc = busy.start(*args)
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline()  # head -1
    proc.stdout.close()
    code = proc.wait(timeout=DEADLINE_S)
    err = proc.stderr.read()
    assert (code, err) == (0, ""), err


def test_a_time_out_of_range_is_a_usage_error(busy: Cli) -> None:
    for args in (("events", "--no-follow", "--since"), ("log", "r1", "--since")):
        proc: subprocess.CompletedProcess[str] = busy(*args, "0001-01-01")
        assert proc.returncode == 2, proc.stderr
        assert "'0001-01-01'" in proc.stderr and "Traceback" not in proc.stderr


def test_ps_watch_prints_the_rows_of_runs_whose_host_died(tmp_path: Path) -> None:
    """A host that dies writes no event; the watch still shows its runs turn `orphaned`,
    as `ps` would, once their lease has lapsed."""
    cli = Cli(tmp_path)
    proc = cli.run_team("boss", "x" * 40_000)  # the listing of boss and slow: over 80 kB
    slow = cli.wait_runs(lambda rows: by_agent(rows, "slow", "running"), "slow running", proc)
    watching = cli.start("ps", "--watch", "--json")
    # the host dies while the watch is still printing its listing (blocked on a full pipe):
    # the watch must judge what changed against the hosts alive when it listed, not later
    _wait_pipe_full(watching)
    proc.kill()
    proc.wait()
    watcher = Lines(watching)
    watcher.until(lambda lines: "]" in lines, "the listing")

    def orphaned(lines: list[str]) -> set[str]:
        rows = [msgspec.json.decode(line) for line in lines if line.startswith("{")]
        return {r["agent"] for r in rows if r["orphaned"]}

    watcher.until(lambda lines: orphaned(lines) == {"boss", "slow"}, "boss and slow orphaned")
    assert [r["orphaned"] for r in cli.json("ps") if r["run_id"] == slow["run_id"]] == [True]
    code, err = watcher.interrupt()
    assert code == 0 and "Traceback" not in err


def test_ps_watch_rows_have_the_listings_columns_label_included(tmp_path: Path) -> None:
    cli = Cli(tmp_path)
    first = cli("run", "quick", "one", "--agents", str(cli.agents), "--label", "nightly")
    assert first.returncode == 0, first.stderr
    watcher = Lines(cli.start("ps", "--watch", "--all", "--label", "nightly"))
    listed = watcher.until(lambda lines: len(lines) >= 2, "the listing: a header, one run")
    assert listed[0].split()[-2:] == ["LABEL", "TASK"] and " nightly " in listed[1]
    again = cli("run", "quick", "two", "--agents", str(cli.agents), "--label", "nightly")
    assert again.returncode == 0, again.stderr
    lines = watcher.until(
        lambda lines: any("completed" in line for line in lines[2:]), "the new run completed"
    )
    rows = [line for line in lines[2:] if line.startswith("- ")]
    assert rows and all(" nightly " in line and line.endswith(" two") for line in rows), rows
    assert watcher.interrupt()[0] == 0


def test_events_since_reads_from_then_not_every_event_the_store_holds(tmp_path: Path) -> None:
    """`events --since 1h` finds where the hour starts by the events' numbers: an old
    event damaged on disk, which it has no reason to read, does not stop it."""
    import sqlite3
    import time

    cli = Cli(tmp_path)
    cli.state.parent.mkdir(parents=True, exist_ok=True)
    day_ago, now = time.time() - 86400, time.time()
    with SQLiteStore(cli.state) as store, store.batch():
        for n in range(1000):
            store.append_event(
                Event(kind=EventKind.STEP, run_id="r1", agent="a", root_run_id="r1", ts=day_ago + n)
            )
        for n in range(3):
            store.append_event(
                Event(kind=EventKind.STEP, run_id="r2", agent="b", root_run_id="r2", ts=now + n)
            )
    with sqlite3.connect(cli.state) as db:
        db.execute("UPDATE events SET event = 'not json' WHERE seq = 1")
    proc = cli("events", "--no-follow", "--since", "1h", "--json")
    assert proc.returncode == 0, proc.stderr
    lines = [msgspec.json.decode(line) for line in proc.stdout.splitlines()]
    assert [(e["seq"], e["event"]["run_id"]) for e in lines] == [
        (1001, "r2"),
        (1002, "r2"),
        (1003, "r2"),
    ]


def test_first_since_finds_the_first_event_at_or_after_the_time_less_the_skew() -> None:
    from subagents.cli.events_cmd import SKEW_S, first_since
    from subagents.store.memory import MemoryStore

    store = MemoryStore()
    assert first_since(store, 0.0) == 0  # nothing yet
    for n in range(100):  # event number n + 1 made at 1000 + 10 n
        store.append_event(
            Event(kind=EventKind.STEP, run_id="r", agent="a", root_run_id="r", ts=1000.0 + 10 * n)
        )
    assert first_since(store, 0.0) == 0  # all of them
    assert first_since(store, 1500.0 + SKEW_S) == 50  # after 50: from the one made at 1500
    assert first_since(store, 1505.0 + SKEW_S) == 51
    assert first_since(store, 99_999.0) == 100  # none: only what comes next


def _wait_pipe_full(proc: subprocess.Popen[str]) -> None:
    """Until ``proc``'s stdout pipe is full, nobody reading it: it is blocked writing."""
    import fcntl
    import termios
    import time

    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    size = fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ)
    deadline = time.monotonic() + DEADLINE_S
    while True:
        held = array.array("i", [0])
        fcntl.ioctl(fd, termios.FIONREAD, held)
        if held[0] >= size:
            return
        assert proc.poll() is None and time.monotonic() < deadline, "the listing never filled"
        time.sleep(0.05)  # the pace of the polling, not what is waited for


def test_stop_of_an_orphaned_run_with_a_child_hosted_elsewhere_says_it_waits(
    tmp_path: Path,
) -> None:
    """An orphaned run whose tree has a run another live process hosts is not ended here
    (that host's run is not this command's to end): the stop is posted, and the command
    must say it waits for a `resume` (its host is gone), not that a host stops it now."""
    import time

    from subagents.messages import Lease, RunRecord, RunStatus

    cli = Cli(tmp_path)
    cli.state.parent.mkdir(parents=True, exist_ok=True)
    now, top, child = time.time(), "r1a2000000000toptoptop", "r1a2000000001childchil"
    with SQLiteStore(cli.state) as store:
        store.save_run(
            RunRecord(
                run_id=top, agent="boss", task="t", root_run_id=top,
                status=RunStatus.WAITING, created_at=now, owner="gone:1:a",
            )
        )  # fmt: skip
        store.save_run(
            RunRecord(
                run_id=child, agent="slow", task="t", root_run_id=top, parent_run_id=top,
                depth=1, status=RunStatus.RUNNING, created_at=now, owner="elsewhere:2:b",
            )
        )  # fmt: skip
        store.acquire_lease(
            Lease(
                owner="elsewhere:2:b",
                host="elsewhere",
                pid=2,
                renewed_at=now,
                expires_at=now + 3600,
            )
        )
    posted = msgspec.json.decode(_stopped(cli, top, "--json").stdout)
    assert posted[0]["command_id"] is not None and posted[0]["orphaned"] is True
    said = _stopped(cli, top).stdout
    assert "waits until `subagents resume`" in said and "within a second" not in said, said


def _stopped(cli: Cli, *args: str) -> subprocess.CompletedProcess[str]:
    proc = cli("stop", *args)
    assert proc.returncode == 0, proc.stderr
    return proc


def test_ps_and_a_short_reference_read_ids_not_every_record(tmp_path: Path) -> None:
    """Showing runs by their unique suffix, and finding the run a suffix names, need every
    run's id, not every run's record: one old record damaged on disk leaves `ps` and
    `log SUFFIX` of the other runs working (and a store of 100,000 runs fast)."""
    import sqlite3
    import time

    from subagents.messages import RunRecord, RunStatus

    cli = Cli(tmp_path)
    cli.state.parent.mkdir(parents=True, exist_ok=True)
    now, old, live = time.time(), "r1a1000000000oldoldold0", "r1a2000000000livelivel1"
    with SQLiteStore(cli.state) as store:
        for run_id, status in ((old, RunStatus.COMPLETED), (live, RunStatus.RUNNING)):
            store.save_run(
                RunRecord(
                    run_id=run_id, agent="quick", task="t", root_run_id=run_id,
                    status=status, created_at=now, owner="gone:1:a",
                )
            )  # fmt: skip
    with sqlite3.connect(cli.state) as db:
        db.execute("UPDATE runs SET record = 'not json' WHERE run_id = ?", (old,))
    rows = cli.json("ps")
    assert [r["run_id"] for r in rows] == [live]
    listed = cli("ps")
    assert listed.returncode == 0 and live[-8:] in listed.stdout, listed.stderr
    shown = cli("log", live[-8:])
    assert shown.returncode == 0 and live in shown.stdout, shown.stderr


@pytest.mark.parametrize("wait", ["nan", "-1"])
def test_stop_with_a_wait_that_is_no_time_is_refused_before_anything_is_posted(
    busy: Cli, wait: str
) -> None:
    """`stop --wait nan` passed the ">= 0" check (NaN compares false), posted its stops and
    then waited without limit (a deadline of NaN is never reached): refused first, naming it."""
    proc = busy("stop", "--all", "--wait", wait)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert f"--wait must be >= 0 seconds, got {wait}" in proc.stderr
    assert proc.stdout == ""
