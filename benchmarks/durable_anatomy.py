"""durable_anatomy: where the wall time of a durable mail goes, natively, thread by thread.

The runtime's durable ping-pong (``mail.py``'s ``pingpong`` on a SQLite store), its in-memory
one, and this design's durable floor (``mail.py``'s ``least_durable``), each timed between its
own start and end marks, with every thread of the process read from the kernel at both marks
(``/proc/self/task/*/schedstat`` and ``status``), per mail, by role (the supervisor, the agents'
threads, the timer, the log's checkpoint thread, the dispatcher's watch; ``spawn.role_of`` for
the rest):

- ``cpu_us``: on a core (the kernel's own count: not a sample, not CPU time of the process);
- ``runq_us``: runnable but waiting for a core (other processes, or our own threads on both
  cores);
- ``sleeps``: voluntary switches (the thread waited: for the GIL, a lock, its queue);
  ``preempted``: involuntary ones.

``wall_us`` is the ping-pong's wall time per mail, ``cpu_sum_us`` the CPU of all its threads per
mail: with one GIL, what a mail's critical path cannot overlap is everyone's Python, so where
``wall_us`` is close to ``cpu_sum_us`` (quiet: ``wall_less_cpu_us`` near zero) the way to a
faster mail is less CPU on any thread (the timer's and the checkpoint's included), not fewer
waits; where it is well above, the critical path waited (``sleeps``) or was not on a core
(``runq_us``, the machine's load). Timed: read next to the load recorded, several rounds
interleaved (``--rounds``: the median of each figure), quiet, under ``flock /tmp/scale.lock``.
``--folder /dev/shm`` puts the stores' files (and the floor's) in memory: what the disk's
writeback costs a durable mail is the difference (session 21: the stalls below are the disk's).

``stalls`` (a pass of its own per round, instrumented: the figures above are not): each
statement the store's connection runs (``conn.execute``/``executemany``, wrapped by a proxy put
in place of the store's connection) and each pass of its checkpoint thread, timed with the
thread's CPU clock and its voluntary switches (``getrusage``): per mail by role, the statements,
those that slept (the thread waited inside: the disk, a lock, the GIL after SQLite let it go)
and their time off the CPU, those that took over 1 ms of CPU (a checkpoint run inline by a
writer's commit: the connection's own backstop), and the checkpoint passes (their count, the
median and longest, the frames of the longest). Session 21 found with it that a sender's
statement that overlaps a long checkpoint pass waits for milliseconds.
``--what-if-no-mail-events`` adds a contender, ``sqlite_no_mail_events``: the same durable
ping-pong with the two events of each straight mail (``mail_sent`` on its sender,
``mail_delivered`` on its recipient) not kept by the supervisor when nobody is handed them
(``mailroom.announce_one`` replaced in this process while it runs: ``without_mail_events``).
Not the runtime (a user's ``subagents log``, ``subagents events`` and the console read those
rows): the bound of what a design that keeps no event row per straight mail (the log reading
the mail table instead) could save. Each SQLite contender's ``mail_event_rows`` per mail (the
store's file read after) says which is which. Session 21 found with it that the two rows are
the supervisor's only writes in a durable ping-pong: without them it commits nothing.
Output: JSON.
"""

from __future__ import annotations

import contextlib
import os
import resource
import sqlite3
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from _common import LoadWindow, emit, parse_args, quiet_logs
from mail import least_durable_pingpong, runtime_rate
from spawn import role_of
from subagents.messages import EventKind
from subagents.store.memory import MemoryStore
from subagents.store.sqlite import SQLiteStore

Threads = dict[int, tuple[str, int, int, int, int]]
"""A thread's id: its name, ns on a core, ns runnable waiting, voluntary and involuntary
switches."""

FIGURES = ("cpu_us", "runq_us", "sleeps", "preempted")


def threads_now() -> Threads:
    """Every live thread of this process, from the kernel (Linux)."""
    names = {t.native_id: t.name for t in threading.enumerate()}
    out: Threads = {}
    for entry in os.listdir("/proc/self/task"):
        tid = int(entry)
        try:
            with open(f"/proc/self/task/{entry}/schedstat", encoding="ascii") as f:
                on_core, waiting, _ = (int(x) for x in f.read().split())
            with open(f"/proc/self/task/{entry}/status", encoding="ascii") as f:
                status = dict(line.split(":", 1) for line in f if ":" in line)
        except (FileNotFoundError, ProcessLookupError):  # it ended meanwhile
            continue
        sleeps = int(status["voluntary_ctxt_switches"])
        preempted = int(status["nonvoluntary_ctxt_switches"])
        out[tid] = (names.get(tid, "?"), on_core, waiting, sleeps, preempted)
    return out


class Marks(dict[str, float]):
    """A ping-pong's marks (``_common.mark``), every thread read at its start and its end."""

    def __init__(self) -> None:
        super().__init__()
        self.at: dict[str, tuple[int, Threads]] = {}

    def __setitem__(self, key: str, value: float) -> None:
        super().__setitem__(key, value)
        if key in ("start", "end"):
            self.at[key] = (time.perf_counter_ns(), threads_now())


def role(name: str) -> str:
    """A thread's role, finer than ``spawn.role_of`` for the threads it calls other."""
    if "checkpoint" in name:
        return "checkpoint"
    if name.startswith("subagents-timer"):
        return "timer"
    if name.endswith("-watch"):
        return "watch"
    return role_of(name)


def anatomy(marks: Marks, mails: int) -> dict[str, Any]:
    """Per mail between the marks: the wall time, and each role's figures (``FIGURES``)."""
    (t0, before), (t1, after) = marks.at["start"], marks.at["end"]
    roles: dict[str, list[float]] = {}
    for tid, (name, *now) in after.items():
        then = before.get(tid, (name, 0, 0, 0, 0))[1:]  # (started since: all of it)
        figures = roles.setdefault(role(name), [0.0] * len(FIGURES))
        for i, (a, b) in enumerate(zip(then, now, strict=True)):
            figures[i] += (b - a) / mails / (1000 if i < 2 else 1)
    wall = (t1 - t0) / mails / 1000
    cpu = sum(figures[0] for figures in roles.values())
    return {
        "wall_us": round(wall, 1),
        "cpu_sum_us": round(cpu, 1),
        "wall_less_cpu_us": round(wall - cpu, 1),
        "roles": {
            name: dict(zip(FIGURES, [round(x, 2) for x in figures], strict=True))
            for name, figures in sorted(roles.items())
            if figures[0] >= 0.05 or figures[2] >= 0.005
        },
    }


Statement = tuple[str, int, int, int, int]
"""A statement timed: its thread's name, its start (ns), wall and CPU ns, voluntary switches."""


class TimedConnection:
    """A SQLite connection whose statements are timed (``stalls``); the rest passes through."""

    def __init__(self, conn: sqlite3.Connection, log: list[Statement]) -> None:
        self._conn = conn
        self._log = log

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)

    def _timed(self, run: Callable[[], Any]) -> Any:
        slept = resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw
        wall, cpu = time.perf_counter_ns(), time.thread_time_ns()
        try:
            return run()
        finally:
            cpu, wall = time.thread_time_ns() - cpu, time.perf_counter_ns() - wall
            slept = resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw - slept
            start = time.perf_counter_ns() - wall
            self._log.append((threading.current_thread().name, start, wall, cpu, slept))

    def execute(self, sql: str, *args: Any) -> Any:
        return self._timed(lambda: self._conn.execute(sql, *args))

    def executemany(self, sql: str, *args: Any) -> Any:
        return self._timed(lambda: self._conn.executemany(sql, *args))


def stalled(store: SQLiteStore, marks: Marks, n: int) -> dict[str, Any]:
    """``n`` durable ping-pong mails on ``store`` with its statements and its checkpoint
    passes timed (``TimedConnection``): per mail by role, and the passes."""
    log: list[Statement] = []
    passes: list[tuple[int, int]] = []
    store._tx._conn = TimedConnection(store._tx._conn, log)  # type: ignore[assignment]
    connect = store._wal.connect

    def checkpointer(path: Path, busy: float) -> Any:
        return _PassTimer(connect(path, busy), passes)

    store._wal.connect = checkpointer
    runtime_rate("pingpong", store, n, marks=marks)
    t0, t1 = marks.at["start"][0], marks.at["end"][0]
    mails = 2 * (n // 2)
    by: dict[str, list[float]] = {}
    for name, start, wall, cpu, slept in log:
        if not t0 <= start <= t1:  # (the runs' start and close: not per mail)
            continue
        figures = by.setdefault(role(name), [0.0] * 5)
        figures[0] += 1 / mails
        figures[1] += cpu / mails / 1000
        if slept:
            figures[2] += 1 / mails
            figures[3] += (wall - cpu) / mails / 1000
        if cpu > 1_000_000:
            figures[4] += 1 / mails
    keys = ("statements", "cpu_us", "slept", "slept_off_cpu_us", "over_1ms_cpu")
    taken = sorted(p for start, p in passes if t0 <= start <= t1)
    return {
        "roles": {r: {k: round(v, 4) for k, v in zip(keys, f, strict=True)} for r, f in by.items()},
        "checkpoint_passes": len(taken),
        "pass_ms_median": round(statistics.median(taken) / 1e6, 1) if taken else 0.0,
        "pass_ms_max": round(taken[-1] / 1e6, 1) if taken else 0.0,
    }


class _PassTimer:
    """The checkpoint thread's connection, its passes timed (``stalled``)."""

    def __init__(self, conn: sqlite3.Connection, passes: list[tuple[int, int]]) -> None:
        self._conn = conn
        self._passes = passes

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)

    def execute(self, sql: str, *args: Any) -> Any:
        start = time.perf_counter_ns()
        rows = self._conn.execute(sql, *args).fetchall()
        if "wal_checkpoint" in sql:
            self._passes.append((start, time.perf_counter_ns() - start))
        return _Rows(rows)


class _Rows(list[Any]):
    """What the checkpoint thread reads of a statement's cursor (``fetchone``, ``fetchall``)."""

    def fetchone(self) -> Any:
        return self[0] if self else None

    def fetchall(self) -> list[Any]:
        return list(self)


@contextlib.contextmanager
def without_mail_events() -> Iterator[None]:
    """While it lasts, a straight mail's two events are not kept when nobody is handed them
    (``MailRoom.posted`` calls ``announce_one`` by the name its module imported): a what-if,
    not the runtime (see the module)."""
    from subagents.supervision import mailroom

    kept = mailroom.announce_one

    def announce(*args: Any) -> None:
        if args[5]:  # ``publish`` (then ``checked``): someone is handed them (kept: a
            # reader would miss them)
            kept(*args)

    mailroom.announce_one = announce
    try:
        yield
    finally:
        mailroom.announce_one = kept


def mail_event_rows(path: Path) -> int:
    """The ``mail_sent`` and ``mail_delivered`` events the store file at ``path`` holds, as
    its readers count them (since schema v13 a row may hold several of a run's events:
    ``store/sqlite_event_groups.py``; the key keeps its name)."""
    store = SQLiteStore(path)
    try:
        count, after = 0, 0
        while page := store.events_after(after, limit=10_000):
            count += sum(s.event.kind in _MAIL_EVENTS for s in page)
            after = page[-1].seq
        return count
    finally:
        store.close()


_MAIL_EVENTS = (EventKind.MAIL_SENT, EventKind.MAIL_DELIVERED)


class Durable:
    """The runtime's durable ping-pong of ``n`` mails, each on a new store file (``rows``: the
    last one's ``mail_event_rows``), or the what-if without its mail events (``bare``)."""

    def __init__(self, folder: Path, n: int, bare: bool = False) -> None:
        self.folder, self.n, self.bare = folder, n, bare
        self.runs = 0
        self.rows = 0

    def __call__(self, marks: Marks) -> Any:
        self.runs += 1
        path = self.folder / f"{'bare' if self.bare else 'a'}-{self.runs}.db"
        with without_mail_events() if self.bare else contextlib.nullcontext():
            rate = runtime_rate("pingpong", SQLiteStore(path), self.n, marks=marks)
        self.rows = mail_event_rows(path)
        return rate


def contenders(folder: Path, n: int, what_if: bool = False) -> dict[str, Callable[[Marks], Any]]:
    """name -> one ping-pong of ``n`` mails noting ``marks`` (``what_if``: and the one without
    its mail events, ``without_mail_events``)."""
    count = iter(range(1_000_000))
    runs: dict[str, Callable[[Marks], Any]] = {
        "sqlite": Durable(folder, n),
        "least_durable": lambda m: least_durable_pingpong(folder, next(count), n, m),
        "memory": lambda m: runtime_rate("pingpong", MemoryStore(), n, marks=m),
    }
    if what_if:
        runs["sqlite_no_mail_events"] = Durable(folder, n, bare=True)
    return runs


def median_of(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Each figure's median over rounds (a role missing from a round counts as zeros)."""
    out: dict[str, Any] = {}
    for key in ("wall_us", "cpu_sum_us", "wall_less_cpu_us"):
        out[key] = round(statistics.median(r[key] for r in rounds), 1)
    names = sorted({name for r in rounds for name in r["roles"]})
    zeros = dict.fromkeys(FIGURES, 0.0)
    out["roles"] = {
        name: {
            f: round(statistics.median(r["roles"].get(name, zeros)[f] for r in rounds), 2)
            for f in FIGURES
        }
        for name in names
    }
    return out


def measure(folder: Path, n: int, rounds: int, what_if: bool = False) -> dict[str, Any]:
    """Each contender ``rounds`` times, interleaved (and the ``stalls`` pass); the median of
    each figure, and all (a durable one's with its ``mail_event_rows`` per mail)."""
    runs = contenders(folder, n, what_if)
    stalls: list[dict[str, Any]] = []
    for run in runs.values():  # a first, uncounted: imports, caches, the first threads
        run(Marks())
    taken: dict[str, list[dict[str, Any]]] = {name: [] for name in runs}
    mails = 2 * (n // 2)
    for _ in range(rounds):
        for name, run in runs.items():
            marks = Marks()
            run(marks)
            figures = anatomy(marks, mails)
            if isinstance(run, Durable):
                figures["mail_event_rows"] = round(run.rows / mails, 3)
            taken[name].append(figures)
        stalls.append(stalled(SQLiteStore(folder / f"stalls-{len(stalls)}.db"), Marks(), n))
    out: dict[str, Any] = {
        name: {**median_of(each), "rounds": each} for name, each in taken.items()
    }
    for name, run in runs.items():
        if isinstance(run, Durable):
            out[name]["mail_event_rows"] = taken[name][-1]["mail_event_rows"]
    out["stalls"] = stalls
    return out


def _extra(parser: Any) -> None:
    parser.add_argument("--n", type=int, default=None, help="mails per ping-pong (6,000)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (3)")
    parser.add_argument(
        "--folder",
        default=None,
        help="where the stores' files go (default: the temporary folder; /dev/shm: no disk)",
    )
    parser.add_argument(
        "--what-if-no-mail-events",
        action="store_true",
        help="add the durable ping-pong without its straight mails' event rows (a bound)",
    )


def main() -> None:
    args = parse_args(__doc__ or "", _extra)
    quiet_logs()
    n = args.n or (200 if args.quick else 6000)
    rounds = 1 if args.quick else args.rounds
    window = LoadWindow()
    prefix = "subagents-durable-anatomy-"
    with tempfile.TemporaryDirectory(prefix=prefix, dir=args.folder) as tmp:
        figures = measure(Path(tmp), n, rounds, args.what_if_no_mail_events)
    folder = str(Path(tmp).parent)
    emit("durable_anatomy", {"mails": 2 * (n // 2), "folder": folder, **figures}, window.record())


if __name__ == "__main__":
    main()
