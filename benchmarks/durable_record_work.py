"""durable_record_work: the instructions of a durable mail's store writes in Python, each
alone: the sender's record, the supervisor's event row, and its line of straight mails'
two events each (a diagnostic, no goal).

Why: inside the runtime the judge (``_instructions.py --shapes pingpong_sqlite``) moves by
2-11% between runs of one tree on a loaded machine, more than a cut of a few calls on one
write; alone, in a loop, the same write counts the same to a few hundred instructions. And
callgrind tells the statement (``pysqlite_connection_execute``, inclusive: binding and
SQLite) from the Python around it, which is what a cut of the store's layers moves.

What each loop does, in a process of its own, on a fenced ``SQLiteStore`` in a temporary
folder (the runtime's lease taken, two live runs):

- ``record``: ``FencedStore.record_mails`` of one mail with the two journal entries and the
  read receipt a ping-pong's reply carries (``SaveJournal``), its start fenced
  (``AttemptFence``): the sender's whole record, as ``actors/mail_desk.py`` makes it
  (``MailDesk.post`` leaves out); two runs taking turns, so each receipt marks a real row
  (the mail it answers), as a ping-pong's does;
- ``event``: ``SQLiteStore.append_event`` of a ``mail_sent`` event inside a fenced batch, 33
  to a batch (a durable ping-pong's group, natively), the batch's commit included: as the
  supervisor's group writes it (``store.writes.write_all``: a batch's writes go to the
  fenced store's inner one, ``writes_go_to``).
- ``line``: a straight mail's two events (``mail_sent`` on its sender, ``mail_delivered`` on
  its recipient, each made by ``effects.event_of`` from its run's record) as the
  supervisor's line of late reports writes them: ``store.writes.write_all`` of ``LINE``
  mails' events into the open fenced batch, ``BATCH`` mails to a batch, its commit
  included; per mail (two events). Session 26 measured with it a line's events held in one
  call and a mail's flat events encoded when sent (-13.1k of 56.3k; reverted as under the
  2% rule of a mail's CPU: benchmarks/README.md). Since session 32 the events are marked
  sure (``AppendEvent.checked``), as ``supervision/mailing.announce_one`` marks a straight
  mail's its sender recorded: the store holds them unchecked.

Each runs ``n`` and ``2n`` times under ``valgrind --tool=callgrind`` (after an uncounted native
run that compiles the bytecode both read, and with ``PYTHONHASHSEED`` fixed: see
``durable_statement.py``); per unit, the difference over ``n``: ``instructions`` (all),
``statement`` (``pysqlite_connection_execute`` inclusive) and ``python`` (the rest). Without
valgrind (or ``--quick``) the loops run natively, uncounted. Output: JSON.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import emit, parse_args, quiet_logs

BATCH = 33
"""Events per batch (``event``), mails per batch (``line``): a durable ping-pong's supervisor
group, natively."""
LINE = 11
"""Mails per line of late reports (``line``): one ``write_all`` of their events."""
_STATEMENT = "pysqlite_connection_execute"


def _loop(kind: str, n: int, folder: Path) -> None:
    """``n`` units of ``kind`` (see the module) on a fresh store in ``folder``."""
    from subagents.messages import (
        Event,
        EventKind,
        JournalEntry,
        Lease,
        Mail,
        RunRecord,
        RunStatus,
    )
    from subagents.store.fencing import Fence, FencedStore
    from subagents.store.sqlite import SQLiteStore
    from subagents.store.writes import AttemptFence, SaveJournal

    store = SQLiteStore(folder / f"{kind}-{n}.db")
    lease = Lease(owner="h:1:a", host="h", pid=1, renewed_at=1.0, expires_at=16.0)
    fenced = FencedStore(store, Fence(lease.owner, store.acquire_lease(lease)))
    for run_id in ("s", "o"):
        fenced.save_run(
            RunRecord(run_id=run_id, agent="a", task="t", root_run_id="s", status=RunStatus.RUNNING)
        )
    if kind == "record":  # (a ping-pong: each reply marks read the mail it answers)
        fences = (AttemptFence("s"), AttemptFence("o"))
        for i in range(n):
            sender, recipient = ("s", "o") if i % 2 == 0 else ("o", "s")
            mail = Mail(
                mail_id=f"m{i}", sender=sender, recipient=recipient, content="ping", sent_at=1.0
            )
            entries = (
                JournalEntry(
                    request_id=f"{sender}:{i}", kind="receive", observed=True, result=f"m{i - 1}"
                ),
                JournalEntry(request_id=f"{sender}:{i + 1}", kind="send"),
            )
            journal = SaveJournal(sender, entries, (f"m{i - 1}",) if i else ())
            fenced.record_mails([mail], journal, fences[i % 2])
    elif kind == "line":
        _lines(fenced, n)
    else:
        event = Event(
            kind=EventKind.MAIL_SENT,
            run_id="s",
            agent="a",
            root_run_id="s",
            ts=time.time(),
            data={"mail_id": "m1", "recipient": "o"},
        )
        for _ in range(n // BATCH):
            with fenced.batch():  # (its writes go to the inner store, as ``write_all``'s do)
                for _ in range(BATCH):
                    store.append_event(event)
    store.close()


def _lines(fenced: Any, n: int) -> None:
    """``n`` straight mails' two events, ``LINE`` mails to a ``write_all``, ``BATCH`` to a
    fenced batch (see the module)."""
    from subagents.messages import EventKind, RunRecord
    from subagents.store.writes import AppendEvent, Write, write_all
    from subagents.supervision.effects import event_of

    runs = [RunRecord(run_id=r, agent="a", task="t", root_run_id="s") for r in ("s", "o")]
    sent, delivered = EventKind.MAIL_SENT, EventKind.MAIL_DELIVERED
    ts = time.time()
    for first in range(0, n, BATCH):
        with fenced.batch():
            for start in range(first, first + BATCH, LINE):
                writes: list[Write] = []
                for i in range(start, start + LINE):
                    sender, recipient = runs[i % 2], runs[1 - i % 2]
                    mail_id = f"m{i:08d}"
                    data = {"mail_id": mail_id, "recipient": recipient.run_id}
                    writes.append(AppendEvent(event_of(sent, sender, ts, data), True))
                    data = {"mail_id": mail_id, "sender": sender.run_id}
                    writes.append(AppendEvent(event_of(delivered, recipient, ts, data), True))
                write_all(fenced, writes)


def _environment() -> dict[str, str]:
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # (the native run writes what both counted read)
    return env


def _command(kind: str, n: int) -> list[str]:
    return [sys.executable, __file__, "--loop", kind, "--n", str(n)]


def _counted(kind: str, n: int, folder: Path) -> tuple[int, int]:
    """Every instruction of a loop's process, and its statements' (inclusive)."""
    out = folder / f"callgrind.{kind}.{n}"
    command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
    done = subprocess.run(
        command + _command(kind, n),
        capture_output=True,
        text=True,
        check=False,
        timeout=1800,
        env=_environment(),
    )
    found = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise RuntimeError(f"callgrind run of {kind} (n={n}) failed: {done.stderr[-1500:]}")
    annotated = subprocess.run(
        ["callgrind_annotate", "--inclusive=yes", "--threshold=100", str(out)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    out.unlink(missing_ok=True)
    statement = 0
    for line in annotated.splitlines():
        match = re.match(r"\s*([\d,]+) .*[:\s]" + _STATEMENT + r"(?:\s|$)", line)
        if match:
            statement = max(statement, int(match.group(1).replace(",", "")))
    return int(found.group(1)), statement


def measure(n: int, count: bool) -> dict[str, Any]:
    """Per unit of each loop (see the module); natively only, uncounted, unless ``count``."""
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="subagents-record-work-") as tmp:
        folder = Path(tmp)
        for kind in ("record", "event", "line"):
            subprocess.run(
                _command(kind, BATCH), check=True, timeout=1800, env=_environment()
            )  # (native: the bytecode compiled once, uncounted)
            if not count:
                out[kind] = {}
                continue
            few, few_statement = _counted(kind, n, folder)
            many, many_statement = _counted(kind, 2 * n, folder)
            instructions = (many - few) / n
            statement = (many_statement - few_statement) / n
            out[kind] = {
                "instructions": round(instructions),
                "statement": round(statement),
                "python": round(instructions - statement),
            }
    return out


def _extra(parser: Any) -> None:
    parser.add_argument("--n", type=int, default=None, help="units of the shorter loop (990)")
    parser.add_argument("--loop", choices=("record", "event", "line"), help=argparse.SUPPRESS)


def main() -> None:
    args = parse_args(__doc__ or "", _extra)
    if args.loop:
        with tempfile.TemporaryDirectory(prefix="subagents-record-loop-") as tmp:
            _loop(args.loop, args.n, Path(tmp))
        return
    quiet_logs()
    n = args.n or (BATCH * 2 if args.quick else 990)
    n = max(BATCH, n - n % BATCH)  # (whole batches of events, in every loop)
    count = shutil.which("valgrind") is not None and not args.quick
    figures = measure(n, count)
    emit("durable_record_work", {"per_unit": figures, "n": n, "counted": count})


if __name__ == "__main__":
    main()
