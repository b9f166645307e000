"""durable_statement: what the sender's one statement of a durable mail costs, against the
durable floor's bare ``INSERT`` of the same rows, counted in instructions.

Why: the sender's record (``store.sqlite_record``) is the only commit on a durable mail's
path, and its statement does more than the floor's (``mail.py``'s ``bare_commit``): it
checks the lease and the sender's start, and carries the journal entries the sender told.
Timed inside the runtime, its figure moves with the load and with whatever else holds the
GIL; replayed alone and counted, it does not.

How: a durable ping-pong of ``n`` mails (``mail.py``'s ``pingpong`` on a SQLite store) is
run with the store's ``execute_alone`` wrapped to keep each statement and its values, and a
copy of the store taken (SQLite's backup) after a tenth of them, while its runs are live and
its lease held. Then each variant replays the kept statements (their mail ids changed, so
each inserts) on a fresh copy of that file, set as the store's is (WAL, ``synchronous =
NORMAL``), in a process of its own:

- ``store``: the statements as the store ran them (with the read receipt each carries, of
  the mail it answers: that mail's replayed row, schema v11);
- ``bare``: the floor's ``INSERT`` of the same rows' six columns, in autocommit.

``instructions_per_statement`` (when ``valgrind`` is installed; not with ``--quick``): the
user-space instructions of a replay of ``--count`` statements less those of one of
``--count`` / 6, divided by the difference (so the interpreter's start and the file's copy
cancel), from callgrind. The kernel's work (the log's writes) is not in it; it is the same
rows and pages for both. ``cpu_us_per_statement``: the median of each statement's thread
CPU in an uninstrumented replay (timed: moves with the load). ``frames_per_statement``: the
pages each statement's commit put in the log (the log's growth over the timed replay, in
frames; None where the log reached the store's automatic checkpoint, which may have started
it again: not so at the default ``--count``). Every replay checks that
each of its statements inserted its row.

``--what-if-event-triggers`` adds two variants, each the store's statements on a copy with a
trigger on the mail table that writes, in the sender's statement, what the supervisor
writes after it for each straight mail (``mailroom.announce_one``): ``events2``, the two
event rows themselves (``mail_sent`` on the sender, ``mail_delivered`` on the recipient, the
JSON built by SQLite from the row and the two runs' columns); ``event1``, one small row
naming the mail (a design whose readers would make the two events from it and the mail
row). What-ifs (session 22, e-durable13): what the sender's write would grow by, against
what the supervisor would no longer write (``durable_anatomy.py --what-if-no-mail-events``).
Each checks that its trigger wrote its rows for every statement. Output: JSON.
"""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import msgspec

from _common import LoadWindow, emit, parse_args, quiet_logs
from mail import _INSERT_MAIL, FLOOR_SENDER_INDEX, runtime_rate
from subagents.store import sqlite_tx, sqlite_wal
from subagents.store.sqlite import SQLiteStore

Kept = list[tuple[str, list[Any]]]


def capture(folder: Path, n: int) -> int:
    """The sender's statements of a durable ping-pong of ``n`` mails, kept in ``folder``
    (``statements.json``) with a copy of the store taken after a tenth of them
    (``snapshot.db``); how many were kept."""
    kept: Kept = []
    original = sqlite_tx.Transactions.execute_alone

    def execute_alone(self: Any, sql: str, params: tuple[Any, ...], doing: str) -> int | None:
        with self.lock:
            if len(kept) == n // 10:
                copy = sqlite3.connect(folder / "snapshot.db")
                self.connection().backup(copy)
                copy.close()
            kept.append((sql, list(params)))
            return original(self, sql, params, doing)

    sqlite_tx.Transactions.execute_alone = execute_alone  # type: ignore[method-assign]
    try:
        runtime_rate("pingpong", SQLiteStore(folder / "run.db"), n)
    finally:
        sqlite_tx.Transactions.execute_alone = original  # type: ignore[method-assign]
    (folder / "statements.json").write_bytes(msgspec.json.encode(kept))
    return len(kept)


def _event_sql(kind: str, run: str, other: str) -> str:
    """A straight mail's ``kind`` event on run ``NEW.<run>`` (its data naming ``other``), as
    ``announce_one`` would have written it, for a trigger's body (``EVENT_TRIGGERS``)."""
    return (
        f"INSERT INTO events (run_id, kind, ts, event) SELECT run_id, '{kind}', NEW.sent_at,"
        f" json_object('kind', '{kind}', 'run_id', run_id, 'agent', agent, 'root_run_id',"
        " root_run_id, 'parent_run_id', parent_run_id, 'depth', depth, 'ts', NEW.sent_at,"
        f" 'data', json_object('mail_id', NEW.mail_id, '{other}', NEW.{other}))"
        f" FROM runs WHERE run_id = NEW.{run};"
    )


EVENT_TRIGGERS = {
    "events2": (
        2,
        "CREATE TRIGGER mail_events AFTER INSERT ON mail BEGIN "
        + _event_sql("mail_sent", "sender", "recipient")
        + _event_sql("mail_delivered", "recipient", "sender")
        + " END",
    ),
    "event1": (
        1,
        "CREATE TRIGGER mail_events AFTER INSERT ON mail BEGIN INSERT INTO events (run_id,"
        " kind, ts, event) VALUES (NEW.sender, 'mail', NEW.sent_at, json_object('mail_id',"
        " NEW.mail_id)); END",
    ),
}
"""What-if variant -> (event rows per mail, the trigger that writes them) (see the module)."""


def replay(folder: Path, variant: str, count: int, timed: bool) -> tuple[list[float], float | None]:
    """The first ``count`` kept statements as ``variant`` on a fresh copy of the snapshot;
    each statement's thread CPU (``timed``) and the log's frames per statement. Raises
    unless each inserted its row (and, a what-if, its trigger its event rows)."""
    kept = msgspec.json.decode((folder / "statements.json").read_bytes(), type=Kept)[:count]
    path = folder / f"replay-{variant}-{count}.db"
    shutil.copy(folder / "snapshot.db", path)
    conn = sqlite3.connect(path, isolation_level=None)
    cpu: list[float] = []
    inserted = 0
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute(f"PRAGMA wal_autocheckpoint = {sqlite_wal.BACKSTOP_PAGES}")
        if variant == "bare":  # (the floor's file as ``mail._floor_file`` makes it)
            conn.execute("DROP TRIGGER IF EXISTS mail_receipt")
            for sql in FLOOR_SENDER_INDEX:
                conn.execute(sql)
        per_mail, trigger = EVENT_TRIGGERS.get(variant, (0, ""))
        if trigger:
            conn.execute(trigger)
        events_before = conn.execute("SELECT count(*) FROM events").fetchone()[0]
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        for sql, params in kept:
            params[0] = f"{params[0]}-again"  # (the snapshot may hold it already)
            if "receipt" in sql:  # the mail it answers, as replayed just before (v11)
                params[-1] = f"{params[-1]}-again"
            if variant == "bare":
                sql, params = _INSERT_MAIL, params[:6]
            start = time.thread_time() if timed else 0.0
            inserted += conn.execute(sql, params).rowcount
            if timed:
                cpu.append(time.thread_time() - start)
        logged = _log_frames(conn, path)
        frames = None if logged >= sqlite_wal.BACKSTOP_PAGES else logged / max(1, len(kept))
        events = conn.execute("SELECT count(*) FROM events").fetchone()[0] - events_before
    finally:
        conn.close()
        path.unlink()
    if inserted != len(kept):
        raise RuntimeError(f"{variant}: {inserted} of {len(kept)} statements inserted a row")
    if events != per_mail * len(kept):
        raise RuntimeError(f"{variant}: {events} event rows for {len(kept)} statements")
    return cpu, frames


def _log_frames(conn: sqlite3.Connection, path: Path) -> int:
    """The frames in the log of the store at ``path`` (emptied before the replay)."""
    page = int(conn.execute("PRAGMA page_size").fetchone()[0])
    log = Path(f"{path}-wal")
    size = log.stat().st_size if log.exists() else 0
    return max(0, size - 32) // (page + 24)  # (its header; each frame's header and page)


REPLAY_ENV = {"PYTHONHASHSEED": "0"}
"""Set in every counted replay's environment: with a random hash seed per process, the
interpreter's own work (dicts, sets, interned strings) differs from one replay to the next
by millions of instructions, which the long replay less the short one does not cancel
(seen: 121,317 and 108,140 instructions per statement for the same statements, unseeded
and seeded; the seeded pairs agree with each other)."""


def _replay_environment() -> dict[str, str]:
    """``REPLAY_ENV``, and bytecode written (``PYTHONDONTWRITEBYTECODE`` dropped): a native
    replay before the counted ones compiles what they import once (``compile_first``), and
    both read it. Else, where bytecode is written, the first counted replay (the long one)
    compiled the package and wrote it for the short one: ~1.9G instructions counted as the
    statements' (1,890,230 per statement read on e-durable10, its bare 84,505)."""
    env = {**os.environ, **REPLAY_ENV}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _replay_command(folder: Path, variant: str, count: int) -> list[str]:
    return [sys.executable, __file__, "--replay", str(folder), variant, str(count)]


def compile_first(folder: Path) -> None:
    """A replay run natively, uncounted: the bytecode the counted replays read."""
    subprocess.run(
        _replay_command(folder, "bare", 1),
        capture_output=True,
        check=True,
        timeout=1800,
        env=_replay_environment(),
    )


def _instructions(folder: Path, variant: str, count: int) -> int:
    """Callgrind's instruction count of a replay of ``count`` statements in a process."""
    command = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"]
    command += _replay_command(folder, variant, count)
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        check=False,
        timeout=1800,
        env=_replay_environment(),
    )
    found = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise RuntimeError(f"callgrind replay of {variant} failed: {done.stderr[-1000:]}")
    return int(found.group(1))


def measure(
    folder: Path, count: int, count_instructions: bool, what_if: bool = False
) -> dict[str, Any]:
    """The figures of the module docstring for each variant (``what_if``: and the two
    triggers')."""
    out: dict[str, Any] = {
        "cpu_us_per_statement": {},
        "instructions_per_statement": {},
        "frames_per_statement": {},
    }
    if count_instructions:
        compile_first(folder)
    for variant in ("store", "bare", *(EVENT_TRIGGERS if what_if else ())):
        cpu, frames = replay(folder, variant, count, timed=True)
        out["cpu_us_per_statement"][variant] = round(statistics.median(cpu) * 1e6, 1)
        out["frames_per_statement"][variant] = None if frames is None else round(frames, 2)
        if count_instructions:
            few = max(1, count // 6)
            many = _instructions(folder, variant, count)
            less = _instructions(folder, variant, few)
            out["instructions_per_statement"][variant] = round((many - less) / (count - few))
    counted = out["instructions_per_statement"]
    if counted:
        out["store_to_bare"] = round(counted["store"] / counted["bare"], 3)
    return out


def _extra(parser: Any) -> None:
    parser.add_argument("--n", type=int, default=None, help="mails of the ping-pong (4,000)")
    parser.add_argument("--count", type=int, default=None, help="statements replayed (1,200)")
    parser.add_argument(
        "--what-if-event-triggers",
        action="store_true",
        help="add the store's statements with a trigger writing the mail's events (what-ifs)",
    )


def main() -> None:
    if sys.argv[1:2] == ["--replay"]:  # (a replay in a process of its own, for callgrind)
        folder, variant, count = sys.argv[2:5]
        replay(Path(folder), variant, int(count), timed=False)
        return
    args = parse_args(__doc__ or "", _extra)
    quiet_logs()
    n = args.n or (200 if args.quick else 4000)
    count = min(args.count or (60 if args.quick else 1200), n - n // 10 - 1)
    window = LoadWindow()
    valgrind = shutil.which("valgrind") is not None and not args.quick
    with tempfile.TemporaryDirectory(prefix="subagents-durable-statement-") as tmp:
        kept = capture(Path(tmp), n)
        figures = measure(Path(tmp), min(count, kept), valgrind, args.what_if_event_triggers)
    figures["statements"] = min(count, kept)
    figures["load"] = window.record()
    emit("durable_statement", figures)


if __name__ == "__main__":
    main()
