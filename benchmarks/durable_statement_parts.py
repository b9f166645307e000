"""durable_statement_parts: the sender's one statement of a durable mail, part by part, and
what the mail table's indexes cost it and the floor's bare ``INSERT`` (a diagnostic, no goal).

Why: the sender's record (``store.sqlite_record``: one ``INSERT OR IGNORE`` in autocommit)
does more than the durable floor's bare ``INSERT`` of the same row (``mail.py``'s
``bare_commit``): the lease's check, the sender's start's check, the carried journal entries
and the read receipt its trigger marks. Which of them costs what says where a cut of the
statement can come from; and what a change of the mail table's schema saves the floor too
says whether it can move the durable goal at all: the floor's file is made by the store
(``mail._floor_file``), so a leaf the store stops writing is one the floor stops writing.

Each variant runs in a process of its own, on a fresh file made by ``SQLiteStore`` (WAL,
``synchronous = NORMAL``, no automatic checkpoint: none falls in one loop and not another),
with the runtime's lease and four live runs in it, the rows of a ping-pong (``mail.
_mail_rows``: two senders taking turns, each reply's receipt naming the mail it answers):

- ``bare``: the floor's ``INSERT`` (its file without the receipt trigger, as the floor's);
- ``store``: the store's statement (``sqlite_record._record_one``: fenced by lease and start,
  two journal entries carried, the receipt in its row: schema v15; the lease by its fence's
  view, made here as its taking makes it: v17, ``store.lease_fences``);
- ``no_receipt``, ``no_start_check``, ``no_journal``: the same with that part left out (the
  store's own statement for it, or the journal NULL);
- ``bare_no_sender_index``, ``store_no_sender_index``: ``bare`` and ``store`` with the
  ``mail_sender`` index dropped (it serves ``WHERE sender = ?`` reads: a replay's
  ``journal_of``, the sweep, a run's mail listing; since v15 also a mail's receipt);
- ``store_receipt_index``: ``store`` with v14's ``mail_sender`` (``(sender, seq)``) and an
  index of its own on ``receipt`` (the road v15 did not take: a page more per commit).

Counted under ``valgrind --tool=callgrind`` with ``n`` and ``2n`` statements (the difference
over ``n``: per statement, every instruction of the process, the loop's few Python calls
included, the same in every variant; ``PYTHONHASHSEED`` fixed), with an uncounted native run
of each first; ``log_frames``: the WAL frames per statement (the log's size after, in
pages, over the statements). Without valgrind (or ``--quick``) the loops run natively,
uncounted. Output: JSON.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from _common import emit, parse_args, quiet_logs

VARIANTS = (
    "bare",
    "store",
    "no_receipt",
    "no_start_check",
    "no_journal",
    "bare_no_sender_index",
    "store_no_sender_index",
    "store_receipt_index",
)
OWNER, EPOCH = "h:1:a", 3
JOURNAL = (
    '[{"request_id":"r1a21d0d5928f28f13050d:7","kind":"receive","observed":true,'
    '"result":"m0000000000000000006"},{"request_id":"r1a21d0d5928f28f13050d:8","kind":"send"}]'
)
"""Two carried journal entries, as a ping-pong's reply carries (its receive, its send)."""


def _file(path: Path, variant: str) -> sqlite3.Connection:
    """A store's file for ``variant``, its lease and the ping-pong's two runs (and two more)
    in it, set as the store's is but with no automatic checkpoint."""
    from subagents.store import lease_fences
    from subagents.store.sqlite import SQLiteStore

    SQLiteStore(path).close()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    if variant.startswith("bare"):
        conn.execute("DROP TRIGGER IF EXISTS mail_receipt")  # (as the floor's file)
        if variant == "bare":
            import mail

            for sql in mail.FLOOR_SENDER_INDEX:  # (as the floor's file, since v15)
                conn.execute(sql)
    if variant == "store_receipt_index":  # (v15's road not taken: an index of its own)
        conn.execute("DROP INDEX mail_sender")
        conn.execute("CREATE INDEX mail_sender ON mail (sender, seq)")
        conn.execute("CREATE INDEX mail_read ON mail (receipt, sender) WHERE receipt IS NOT NULL")
    if variant.endswith("no_sender_index"):
        conn.execute("DROP INDEX mail_sender")
    conn.execute(
        "INSERT INTO leases (owner, host, pid, renewed_at, expires_at, lease, epoch)"
        " VALUES (?, 'h', 1, 0, 0, ?, ?)",
        (OWNER, f'{{"epoch": {EPOCH}}}', EPOCH),
    )
    if not variant.startswith("bare"):  # (its fence, as its taking made it: v17)
        conn.execute(lease_fences.create_sql(EPOCH))
    for run_id in (*_RUNS, *(f"{r}x" for r in _RUNS)):
        conn.execute(
            "INSERT INTO runs (run_id, agent, status, root_run_id, depth, created_at, record)"
            " VALUES (?, 'a', 'running', ?, 1, 0, '{}')",
            (run_id, _RUNS[0]),
        )
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # (the log starts empty: its frames counted)
    return conn


_RUNS = ("r1a21d0d5928f28f13050d", "r1a21d0d592974e3d6ee38")
"""``mail._mail_rows``' two runs."""


def _statements(variant: str, n: int) -> tuple[str, list[tuple[Any, ...]]]:
    """``variant``'s SQL and its ``n`` rows' parameters."""
    import mail
    from subagents.store.sqlite_record import _record_one

    rows = mail._mail_rows(0, n)
    if variant.startswith("bare"):
        return mail._INSERT_MAIL, rows
    receipt, start = variant != "no_receipt", variant != "no_start_check"
    journal = None if variant == "no_journal" else JOURNAL
    out = []
    for i, row in enumerate(rows):
        params: tuple[Any, ...] = (*row, journal)  # (the lease: its view, since v17)
        if start:
            params += (row[1], 0, 0)
        if receipt:
            params += (rows[i - 1][0] if i else "none",)
        out.append(params)
    return _record_one(start, receipt, EPOCH), out


def _loop(variant: str, n: int, folder: Path) -> None:
    """``n`` statements of ``variant``, each in autocommit; checks every row was kept and
    (where the receipt is marked) every mail answered is read."""
    conn = _file(folder / f"{variant}-{n}.db", variant)
    sql, rows = _statements(variant, n)
    for params in rows:
        conn.execute(sql, params)
    kept = conn.execute("SELECT count(*) FROM mail").fetchone()[0]
    if kept != n:
        raise RuntimeError(f"{variant}: {kept} of {n} mails kept (the fence refused some?)")
    read = conn.execute(_READ).fetchone()[0]
    if read != (0 if variant.startswith("bare") or variant == "no_receipt" else n - 1):
        raise RuntimeError(f"{variant}: {read} mails marked read")
    frames = (folder / f"{variant}-{n}.db-wal").stat().st_size // 4096
    conn.close()
    print(frames)


_READ = """SELECT count(*) FROM mail WHERE state = 'read'
    OR mail_id IN (SELECT receipt FROM mail WHERE receipt IS NOT NULL)"""
"""The mail read: marked in its column, or by a receipt on its reader's row (schema v15; a
ping-pong's receipts are all its readers'). By the ``mail_id`` index, in every variant: a
check that scanned per row would count its own work in the loop's figure."""


def _environment() -> dict[str, str]:
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _command(variant: str, n: int) -> list[str]:
    return [sys.executable, __file__, "--loop", variant, "--n", str(n)]


def _native(variant: str, n: int) -> int:
    """The loop run natively; the log's pages after it."""
    done = subprocess.run(
        _command(variant, n),
        capture_output=True,
        text=True,
        check=True,
        timeout=1800,
        env=_environment(),
    )
    return int(done.stdout.split()[-1])


def _counted(variant: str, n: int, folder: Path) -> int:
    """Every instruction of a loop's process."""
    out = folder / f"callgrind.{variant}.{n}"
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *_command(variant, n)],
        capture_output=True,
        text=True,
        check=False,
        timeout=3600,
        env=_environment(),
    )
    out.unlink(missing_ok=True)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise RuntimeError(f"callgrind run of {variant} (n={n}) failed: {done.stderr[-1500:]}")
    return int(found.group(1))


def measure(n: int, count: bool) -> dict[str, Any]:
    """Per statement of each variant (see the module)."""
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="subagents-statement-parts-") as tmp:
        for variant in VARIANTS:
            few_frames = _native(variant, n)
            many_frames = _native(variant, 2 * n)
            figures: dict[str, Any] = {"log_frames": round((many_frames - few_frames) / n, 2)}
            if count:
                few = _counted(variant, n, Path(tmp))
                many = _counted(variant, 2 * n, Path(tmp))
                figures["instructions"] = round((many - few) / n)
            out[variant] = figures
    if count:
        store, bare = out["store"]["instructions"], out["bare"]["instructions"]
        out["store_over_bare"] = store - bare
        for part in ("no_receipt", "no_start_check", "no_journal"):
            out[f"{part}_saves"] = store - out[part]["instructions"]
        out["sender_index_saves_store"] = store - out["store_no_sender_index"]["instructions"]
        out["sender_index_saves_bare"] = bare - out["bare_no_sender_index"]["instructions"]
    return out


def _extra(parser: Any) -> None:
    parser.add_argument("--n", type=int, default=None, help="statements of the shorter loop (600)")
    parser.add_argument("--loop", choices=VARIANTS, help=argparse.SUPPRESS)


def main() -> None:
    args = parse_args(__doc__ or "", _extra)
    if args.loop:
        with tempfile.TemporaryDirectory(prefix="subagents-statement-loop-") as tmp:
            _loop(args.loop, args.n, Path(tmp))
        return
    quiet_logs()
    n = args.n or (20 if args.quick else 600)
    count = shutil.which("valgrind") is not None and not args.quick
    emit("durable_statement_parts", {"per_statement": measure(n, count), "n": n, "counted": count})


if __name__ == "__main__":
    main()
