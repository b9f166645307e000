"""A hostile store row reaches no terminal raw: another process on the machine (or an agent
whose sandbox reaches the store file) can write a lease's host name, an agent's name, an
error, with terminal escape sequences in them (retitle the window, clear the screen, make
text read backwards). Every human view and every error line shows their control characters
as escapes (``output.printable``); ``--json`` keeps them exact, JSON-escaped. Each through the
real command (``clikit.Cli``), on a real store file the test wrote the hostile rows into."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import msgspec
import pytest
from clikit import Cli, write_lock_held

from subagents.messages import Event, EventKind, Lease, Outcome, RunRecord, RunStatus
from subagents.store.leases import machine_id
from subagents.store.sqlite import SQLiteStore

HOST = "evil\x1b]0;pwned\x07\x1b[2J\u202eback\x9b31m"
"""A host name that retitles the window (OSC 0 ... BEL), clears the screen (CSI 2J), turns
the text after it backwards (U+202E) and starts an 8-bit CSI (0x9b)."""
SHOWN = "evil\\x1b]0;pwned\\x07\\x1b[2J\\u202eback\\x9b31m"
"""``HOST`` as a terminal gets it: every control character an escape."""
AGENT = "bad\x1b[8mhidden"
"""An agent name that hides what follows it (CSI 8m: concealed)."""
AGENT_SHOWN = "bad\\x1b[8mhidden"
RAW = ("\x1b", "\x07", "\u202e", "\x9b")

ORPHAN = "r1a2000000000orphanorph"
ENDED = "r1a2000000001endedended"
OWNER = "evilhost:424242:n0nce"


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    """A store holding an orphaned run whose host's lease names ``HOST`` (lapsed, its pid a
    live process of this machine: this test's, so it also looks stalled) and an ended run
    of the agent ``AGENT``."""
    cli = Cli(tmp_path)
    cli.state.parent.mkdir(parents=True, exist_ok=True)
    now = time.time()
    with SQLiteStore(cli.state) as store:
        store.save_run(
            RunRecord(
                run_id=ORPHAN, agent="worker", task="t", root_run_id=ORPHAN,
                status=RunStatus.RUNNING, created_at=now, owner=OWNER,
            )
        )  # fmt: skip
        store.save_run(
            RunRecord(
                run_id=ENDED, agent=AGENT, task="t", root_run_id=ENDED,
                status=RunStatus.FAILED, created_at=now, ended_at=now,
                outcome=Outcome(
                    run_id=ENDED, status=RunStatus.FAILED, error_kind="x", error=HOST
                ),
            )
        )  # fmt: skip
        store.acquire_lease(
            Lease(
                owner=OWNER, host=HOST, pid=os.getpid(), machine=machine_id(),
                renewed_at=now - 200, expires_at=now - 100,
            )
        )  # fmt: skip
    return cli


def _clean(proc: subprocess.CompletedProcess[str]) -> str:
    """The command's stdout and stderr, once neither holds a raw control character."""
    said = proc.stdout + proc.stderr
    assert not [c for c in RAW if c in said], repr(said)
    return said


@pytest.mark.parametrize("command", [("wait",), ("log", "-f"), ("attach",)])
def test_the_orphaned_line_of_a_follower_shows_a_hostile_host_escaped(
    cli: Cli, command: tuple[str, ...]
) -> None:
    proc = cli(*command, ORPHAN)
    assert proc.returncode == 6, proc.stderr  # orphaned
    said = _clean(proc)
    assert f"is orphaned: its host ({SHOWN} pid {os.getpid()}" in said, said


def test_the_busy_store_error_names_a_hostile_stalled_host_escaped(cli: Cli) -> None:
    """The store's write lock held (as by a host stopped inside a write): `resume` fails
    after its busy timeout naming the stalled host, the lease's host name escaped."""
    with write_lock_held(cli.state):
        proc = cli("resume", "--agents", str(cli.agents))
    assert proc.returncode == 1, proc.stderr
    said = _clean(proc)
    assert "busy" in said and f"held by a host stopped or hung inside a write: {SHOWN}" in said


def test_an_error_naming_a_hostile_agent_shows_it_escaped(cli: Cli) -> None:
    proc = cli("stop", ENDED)
    assert proc.returncode == 1, proc.stderr
    said = _clean(proc)
    assert f"({AGENT_SHOWN}) has already ended" in said, said


@pytest.mark.parametrize(
    "args", [("info", ORPHAN), ("info", ENDED), ("ps", "--all"), ("resume", "--list")]
)
def test_the_views_of_hostile_rows_show_them_escaped(cli: Cli, args: tuple[str, ...]) -> None:
    proc = cli(*args)
    assert proc.returncode == 0, proc.stderr
    assert "\\x1b" in _clean(proc)


def test_json_keeps_the_hostile_strings_exact_and_escaped(cli: Cli) -> None:
    """JSON escapes the C0 controls (ESC, BEL) itself, and ``output.json_text`` the 8-bit
    CSI and the bidirectional override msgspec writes raw; the reader gets the text stored."""
    proc = cli("info", ORPHAN, "--json")
    assert proc.returncode == 0, proc.stderr
    _clean(proc)
    assert HOST in msgspec.json.decode(proc.stdout)["host"]


def test_a_json_line_keeps_hostile_strings_exact_and_escaped(cli: Cli) -> None:
    """The one-line JSON views (``events --json``, ``ps --watch --json``, ``log -f --json``,
    ``run --json``) write through ``output.json_line``: ``events --json`` over an event
    whose data holds the hostile text."""
    with SQLiteStore(cli.state) as store:
        store.append_event(
            Event(kind=EventKind.FAILED, run_id=ENDED, agent=AGENT, root_run_id=ENDED,
                  data={"error": HOST})
        )  # fmt: skip
    proc = cli("events", "--since", "1h", "--no-follow", "--json")
    assert proc.returncode == 0, proc.stderr
    _clean(proc)
    lines = [msgspec.json.decode(line) for line in proc.stdout.splitlines() if line]
    assert [line["event"]["data"]["error"] for line in lines] == [HOST], lines


def test_a_busy_store_met_by_stop_names_the_stalled_host_escaped(cli: Cli) -> None:
    """``stop`` writes: with the store's write lock held it fails after its busy timeout,
    naming the stalled host likely holding it (as ``resume`` does), escaped."""
    with write_lock_held(cli.state):  # (a process of its own: the stalled host is this one)
        proc = cli.process("stop", ORPHAN)
    assert proc.returncode == 1, proc.stderr
    said = _clean(proc)
    assert "busy" in said and f"held by a host stopped or hung inside a write: {SHOWN}" in said


def test_a_hostile_run_id_is_shortened_escaped() -> None:
    """A run's id is the store's text too: the live views' short form of one holding an
    escape sequence shows it escaped (``short_id``, ``short_ids``)."""
    from subagents.cli.state import short_id, short_ids

    hostile = "r1a2000000\x1b[2J\x1b]0;x\x07"
    assert short_id(hostile) == "2J\\x1b]0;x\\x07"  # its last 8 characters
    shown = short_ids([hostile], [hostile, "r1a2000000zzzzzzzz"])[hostile]
    assert "\x1b" not in shown and shown.endswith("\\x1b]0;x\\x07"), shown
