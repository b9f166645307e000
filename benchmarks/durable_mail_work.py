"""durable_mail_work: where a durable mail's store work goes, counted per mail by thread.

The runtime's durable ping-pong (``mail.py``'s ``pingpong`` on a SQLite store) run twice,
``n`` and ``2n`` mails, each figure the difference divided by ``n`` (the runs' start and end
cancel out), by role (``spawn.role_of``: supervisor, agents, caller, other):

- ``statements``: the SQL statements run on the store's connection, by role and by kind (its
  first words: ``BEGIN IMMEDIATE``, ``INSERT INTO mail``, ``COMMIT``...), from SQLite's trace
  callback (so counted, not timed), in a pair of runs of their own: the callback runs inside
  the lock's holds (SQLite hands it each statement with its values written in, ~600
  characters for the sender's, and it calls Python), which added 20-35 us of CPU to each of
  the sender's holds when both were taken in one run. The WAL thread's checkpoints are on a
  connection of their own and not in it; it takes the store's lock only when it starts and
  stops.
- ``lock`` (a second pair of runs, untraced): the store's lock (``Transactions.lock``) taken
  from outside (not re-entered), by
  role: ``holds`` per mail, how many of them found it held (``contended``), and the
  microseconds held, of them on the thread's CPU (``held_cpu_us``: the rest it waited for
  the GIL or the disk), and waited per mail (timed: on a loaded machine these move with the
  load; read them next to the load recorded).
- ``supervisor_messages``: the messages the supervisor handled per mail, by kind (each is a
  wake-up of its thread or a message behind one): ``ReportsDue(late)`` is the linger's timer
  (``REPORTS_DUE``), ``ReportsDue(now)`` a report someone waits on.
- ``msgs_per_s``: the untraced ``2n`` run's rate (timed; for A/B runs of this script only:
  ``mail.py``'s figures are the uninstrumented ones).

Instrumented by wrapping (never in the timed figures of ``mail.py``). Output: JSON.
"""

from __future__ import annotations

import math
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from _common import LoadWindow, emit, parse_args, quiet_logs
from mail import runtime_rate
from spawn import role_of
from subagents.actors.group_linger import ReportsDue
from subagents.actors.supervisor import SupervisorActor
from subagents.store.sqlite import SQLiteStore


class _Tally:
    """What one ping-pong did, by role."""

    def __init__(self) -> None:
        self.statements: Counter[str] = Counter()
        self.kinds: Counter[str] = Counter()
        self.holds: Counter[str] = Counter()
        self.contended: Counter[str] = Counter()
        self.held_s: Counter[str] = Counter()
        self.waited_s: Counter[str] = Counter()
        self.held_cpu_s: Counter[str] = Counter()
        self.messages: Counter[str] = Counter()


class _TimedLock:
    """The store's reentrant lock, its outermost holds counted and timed per role."""

    def __init__(self, tally: _Tally) -> None:
        self._lock = threading.RLock()
        self._tally = tally
        self._local = threading.local()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        depth = getattr(self._local, "depth", 0)
        if depth:
            self._lock.acquire()
            self._local.depth = depth + 1
            return True
        role = role_of(threading.current_thread().name)
        start = time.perf_counter()
        if not self._lock.acquire(blocking=False):
            self._tally.contended[role] += 1
            if not self._lock.acquire(blocking, timeout):
                return False
        now = time.perf_counter()
        self._tally.waited_s[role] += now - start
        self._tally.holds[role] += 1
        self._local.depth = 1
        self._local.since = now
        self._local.cpu = time.thread_time()
        return True

    def release(self) -> None:
        depth = self._local.depth - 1
        self._local.depth = depth
        if depth == 0:
            role = role_of(threading.current_thread().name)
            self._tally.held_s[role] += time.perf_counter() - self._local.since
            self._tally.held_cpu_s[role] += time.thread_time() - self._local.cpu
        self._lock.release()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *_exc: object) -> None:
        self.release()


def _kind(sql: str) -> str:
    words = sql.split()
    if not words:
        return "?"
    head = words[0].upper()
    if head == "INSERT" and len(words) > 2 and words[1].upper() == "OR":
        words = [words[0], *words[3:]]  # ``INSERT OR IGNORE INTO mail``: the table, as plain
    if head in ("INSERT", "DELETE") and len(words) > 2:
        return f"{head} {words[2]}"
    if head == "UPDATE" and len(words) > 1:
        return f"UPDATE {words[1]}"
    if head in ("BEGIN", "SAVEPOINT", "RELEASE", "ROLLBACK") and len(words) > 1:
        return f"{head} {words[1]}" if head == "BEGIN" else head
    return head


def _counted(folder: Path, index: int, n: int, tally: _Tally, trace: bool) -> float:
    """One durable ping-pong of ``n`` mails, its store instrumented into ``tally``: its
    statements counted (``trace``), or its lock timed (not both: see the module)."""
    store = SQLiteStore(folder / f"work-{index}.db")
    tx = store._tx
    if not trace:
        tx.lock = _TimedLock(tally)  # type: ignore[assignment]
        return runtime_rate("pingpong", store, n).per_s

    def traced(sql: str) -> None:
        role = role_of(threading.current_thread().name)
        tally.statements[role] += 1
        tally.kinds[f"{role}: {_kind(sql)}"] += 1

    tx.connection().set_trace_callback(traced)
    return runtime_rate("pingpong", store, n).per_s


def _handled(tally: list[_Tally]) -> Any:
    """``SupervisorActor.on_receive`` counting the message kinds into ``tally[0]``."""
    original = SupervisorActor.on_receive

    def on_receive(self: SupervisorActor, message: Any) -> Any:
        kind = type(message).__name__
        if type(message) is ReportsDue:
            kind += "(late)" if message.upto == math.inf else "(now)"
        tally[0].messages[kind] += 1
        return original(self, message)

    return original, on_receive


def per_mail(folder: Path, n: int) -> dict[str, Any]:
    """The figures of the module docstring: (the ``2n`` run - the ``n`` run) / ``n``; the
    statements from a traced pair of runs, the rest from an untraced pair."""
    current = [_Tally()]
    original, wrapped = _handled(current)
    tallies: list[_Tally] = []
    rate = 0.0
    for trace in (True, False):
        SupervisorActor.on_receive = wrapped if not trace else original  # type: ignore[method-assign]
        try:
            for mails in (n, 2 * n):
                current[0] = _Tally()
                rate = _counted(folder, len(tallies), mails, current[0], trace)
                tallies.append(current[0])
        finally:
            SupervisorActor.on_receive = original  # type: ignore[method-assign]
    traced_small, traced_large, small, large = tallies
    small.statements, small.kinds = traced_small.statements, traced_small.kinds
    large.statements, large.kinds = traced_large.statements, traced_large.kinds

    def diff(field: str, scale: float = 1.0, digits: int = 2) -> dict[str, float]:
        a, b = getattr(small, field), getattr(large, field)
        keys = sorted(set(a) | set(b))
        return {k: round((b[k] - a[k]) * scale / n, digits) for k in keys if b[k] or a[k]}

    return {
        "statements": diff("statements"),
        "statement_kinds": diff("kinds"),
        "lock": {
            "holds": diff("holds"),
            "contended": diff("contended"),
            "held_us": diff("held_s", 1e6, 1),
            "held_cpu_us": diff("held_cpu_s", 1e6, 1),
            "waited_us": diff("waited_s", 1e6, 1),
        },
        "supervisor_messages": diff("messages"),
        "msgs_per_s": round(rate),
    }


def _extra(parser: Any) -> None:
    parser.add_argument("--n", type=int, default=None, help="mails of the smaller run (1,000)")


def main() -> None:
    args = parse_args(__doc__ or "", _extra)
    quiet_logs()
    n = args.n or (100 if args.quick else 1000)
    window = LoadWindow()
    with tempfile.TemporaryDirectory(prefix="subagents-durable-work-") as tmp:
        figures = per_mail(Path(tmp), n)
    figures["load"] = window.record()
    figures["mails"] = n
    emit("durable_mail_work", figures)


if __name__ == "__main__":
    main()
