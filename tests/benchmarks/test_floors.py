"""The design floors and the machine's balance (benchmarks/_least_mail.py, _least_fanout.py,
_balance.py, _floor_rows.py): each floor does all the work its docstring says the design
requires (a floor that does less is a lie, and would call a goal reachable that is not), and
the rows and the balance read what was measured. Nothing here is timed: counts, records and
the shape of what is printed."""

from __future__ import annotations

import itertools
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def bench() -> Iterator[dict[str, ModuleType]]:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import _balance
        import _floor_rows
        import _least_fanout
        import _least_mail
        import run_all
    finally:
        sys.path.remove(str(BENCHMARKS))
    yield {
        "balance": _balance,
        "rows": _floor_rows,
        "fanout": _least_fanout,
        "mail": _least_mail,
        "run_all": run_all,
    }


def test_the_least_mail_records_delivers_and_marks_read_every_mail(
    bench: dict[str, ModuleType],
) -> None:
    """Every mail of the least ping-pong is recorded by its supervisor, read (its receipt
    reached the supervisor) and logged as an event; durable, each committed once, before
    anything else of its step's end, by its sender's own thread."""
    least = bench["mail"]
    committed: list[tuple[str, str, int]] = []

    def commit(mail: Any) -> None:
        import threading

        committed.append((mail.mail_id, threading.current_thread().name, len(committed)))

    senders: list[str] = []

    def commit_noting(mail: Any) -> None:
        senders.append(mail.sender)
        commit(mail)

    rate, recorded = least.least_mail_pingpong(40, commit_noting)
    assert recorded == {"mails": 40, "read": 40, "events": 40}
    assert rate.per_s > 0 and rate.cpu_us > 0
    assert len({mail_id for mail_id, _, _ in committed}) == 40  # each mail once
    # the senders in turn: pinger, ponger, pinger, ...
    assert senders[:2] == ["pinger", "ponger"]
    assert all(a != b for a, b in itertools.pairwise(senders))


def test_the_least_mail_runs_both_agents_on_one_thread_as_the_dispatcher_does(
    bench: dict[str, ModuleType],
) -> None:
    """The runtime's dispatcher takes a handling's mail to another run in line on the same
    thread (actors/handoff.py: "a ping-pong then ran on one thread"), so the design pays no
    thread switch between its two agents; a floor with a thread per agent pays one per mail
    the design does not (~4 context switches per mail against the runtime's ~0.15, measured
    by getrusage at load ~7), and would read a goal unreachable that the design can reach.
    Every step of both agents runs on the one line thread (a sender commits on it)."""
    import threading

    where: set[str] = set()

    def commit(mail: Any) -> None:
        where.add(threading.current_thread().name)

    bench["mail"].least_mail_pingpong(40, commit)
    assert where == {"least-agent-line"}


@pytest.mark.parametrize("late", [True, False])
def test_the_least_durable_puts_its_reports_in_the_late_line(
    bench: dict[str, ModuleType], monkeypatch: pytest.MonkeyPatch, late: bool
) -> None:
    """The durable design puts a step's report in a line its supervisor takes within
    ``LINGER_S`` (``LateReports``), so its supervisor is not woken per mail; a floor whose
    supervisor is told each report does more than the design (and would call a goal
    unreachable that is not). With ``late``, no report is told: every one reaches the
    supervisor through the line, taken when the line's timer wakes it or before the next
    message it handles (the final count's ask, on a fast machine: no wake-up at all; at most
    one per report on a slow one), and every mail is still recorded and read; the line's
    timer thread is gone after. Without it (the in-memory floor), each is told."""
    import threading

    least = bench["mail"]
    handled: list[str] = []
    original = least.Supervisor.on_receive

    def on_receive(self: Any, message: Any) -> Any:
        handled.append(type(message).__name__)
        return original(self, message)

    monkeypatch.setattr(least.Supervisor, "on_receive", on_receive)
    _, recorded = least.least_mail_pingpong(40, lambda mail: None, late=late)
    assert recorded == {"mails": 40, "read": 40, "events": 40}
    posted, woken = handled.count("Posted"), handled.count("Due")
    if late:
        assert posted == 0 and woken <= 41  # (40 mails; the last step's receipt alone)
    else:
        assert posted == 41 and woken == 0
    assert not [t for t in threading.enumerate() if t.name == "least-timer"]


def test_the_least_durable_supervisor_commits_each_line_it_takes_at_once(
    bench: dict[str, ModuleType], tmp_path: Path
) -> None:
    """The durable design's supervisor commits what it took from the late line as one
    group (one transaction per lingering group, not per report): the floor's supervisor
    commits each take once (``group_commit``), every mail's event and every mail read in
    exactly one of them, in order; ``mail.py``'s floor writes them to its file (its events
    and read states there). Seen failing before the floor committed anything on the
    supervisor's side (no ``group_commit``)."""
    import sqlite3

    least = bench["mail"]
    groups: list[tuple[list[Any], list[str]]] = []
    _, recorded = least.least_mail_pingpong(
        40, lambda mail: None, late=True, group_commit=lambda e, r: groups.append((e, r))
    )
    assert recorded == {"mails": 40, "read": 40, "events": 40}
    events = [e for taken, _ in groups for e in taken]
    read = [mail_id for _, ids in groups for mail_id in ids]
    assert len(events) == 40 and len(set(map(id, events))) == 40
    assert len(read) == 40 and len(set(read)) == 40
    assert all(taken or ids for taken, ids in groups)  # a take of nothing commits nothing
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import mail
    finally:
        sys.path.remove(str(BENCHMARKS))
    mail.least_durable_pingpong(tmp_path, 0, 40)
    conn = sqlite3.connect(tmp_path / "least-durable-0.db")
    try:
        assert conn.execute("SELECT count(*) FROM events").fetchone() == (40,)
        states = dict(conn.execute("SELECT state, count(*) FROM mail GROUP BY state").fetchall())
        assert states == {"read": 40}
    finally:
        conn.close()


def test_the_least_durable_supervisor_commits_a_take_of_receipts_alone(
    bench: dict[str, ModuleType],
) -> None:
    """A take of the late line may hold receipts and no mail (the last step's: it read the
    last mail and sent none; taken alone whenever the line's timer woke the supervisor
    before it): the design commits those mails' read state too, so the floor must. Seen
    failing when the floor committed only a take with events (the last mail left
    ``delivered`` in the floor's file, about 1 run in 15)."""
    least = bench["mail"]
    groups: list[tuple[list[Any], list[str]]] = []
    late = least.LateLine()
    supervisor = least.Supervisor.start(late, lambda e, r: groups.append((list(e), list(r))))
    late.supervisor = supervisor
    try:
        sent = least.Mail(mail_id="m", sender="a", recipient="b", content="", sent_at=0.0)
        late.put(least.Posted((sent,), ()))
        supervisor.ask("count", timeout=least.WAIT)  # (the line taken: its mail's event)
        late.put(least.Posted((), ("m",)))
        recorded = supervisor.ask("count", timeout=least.WAIT)
    finally:
        late.close()
        supervisor.stop()
    assert recorded == {"mails": 1, "read": 1, "events": 1}
    assert [(len(events), read) for events, read in groups] == [(1, []), (0, ["m"])]


def test_the_least_mail_is_made_of_the_runtimes_parts(bench: dict[str, ModuleType]) -> None:
    """Its actors are the runtime's kind (``FastInboxActor``: a ``SimpleQueue`` inbox), each
    mail the runtime's ``Mail`` record, and the work is counted on the roles' threads (a
    thread named otherwise would count as "other" and hide where the floor's calls go)."""
    least = bench["mail"]
    from subagents.actors.inbox import FastInboxActor
    from subagents.messages import Mail

    assert issubclass(least.Agent, FastInboxActor) and issubclass(least.Supervisor, FastInboxActor)
    context = least.Context("r-1")
    context.send("r-2", "hi")
    assert isinstance(context.held[0], Mail) and context.held[0].recipient == "r-2"
    counted = least.least_calls_per_mail(20)
    assert counted["agents"] > 0 and counted["supervisor"] > 0
    assert counted["other"] == 0  # every thread of the least mail has its role's name


def test_the_least_fanout_holds_the_limit_and_ends_every_child(
    bench: dict[str, ModuleType],
) -> None:
    """At most ``limit`` children asleep at once, and reached (the queue fed every freed
    slot); it returns only once every child's outcome reached the parent."""
    makespan, most = bench["fanout"].least_fanout(30, 5, 0.002)
    assert most == 5
    assert makespan >= 30 / 5 * 0.002  # six waves of calls at least: none was skipped


def test_the_balance_says_how_many_calls_a_hand_off_costs(bench: dict[str, ModuleType]) -> None:
    b = bench["balance"].measure(1, 2_000, 2_000, 50)
    # (of the printed, rounded figures: so within a call or two)
    wall = b["ask_us"] / 2 * 1e3 / b["call_ns"]
    assert b["calls_per_handoff"] == pytest.approx(wall, rel=0.01, abs=1)
    cpu = b["ask_cpu_us"] / 2 * 1e3 / b["call_cpu_ns"]
    assert b["calls_per_handoff_cpu"] == pytest.approx(cpu, rel=0.01, abs=1)
    assert b["handoff_us"] == pytest.approx(b["ask_us"] / 2, abs=0.01)
    assert b["sizes"] == {"calls": 2_000, "loops": 2_000, "asks": 50, "repeats": 1}
    assert b["load"]["loaded"] == (b["load"]["max"] > 1.5)


def _reading(call_ns: float, ask_us: float) -> dict[str, Any]:
    figures = {
        "call_ns": call_ns,
        "call_cpu_ns": call_ns,
        "attr_loop_ns": 2 * call_ns,
        "ask_us": ask_us,
        "ask_cpu_us": ask_us / 2,
        "calls_per_handoff": round(ask_us / 2 * 1e3 / call_ns),
        "calls_per_handoff_cpu": round(ask_us / 4 * 1e3 / call_ns),
        "load": {"start": 0.5, "end": 0.7, "max": 0.7, "loaded": False},
    }
    return {"benchmark": "balance", "figures": figures, "load": figures["load"]}


def test_run_all_reads_the_balance_before_and_after(bench: dict[str, ModuleType]) -> None:
    run_all = bench["run_all"]
    balance = {"benchmark": "balance", "readings": [_reading(100, 40), _reading(200, 40)]}
    note = run_all.balance_note(balance)
    assert "a Python call 100 / 200 ns" in note and "200 / 100 Python calls" in note
    text = run_all.tables([balance])
    rows = [line for line in text.splitlines() if line.startswith("| the machine's balance")]
    assert len(rows) == 2 and "before the benchmarks" in rows[0] and "after" in rows[1]
    assert "a hand-off = 200 calls" in rows[0] and rows[0].endswith("| 0.70 |")
    failed = {"benchmark": "balance", "readings": [{"benchmark": "_balance", "error": "boom"}]}
    assert "boom" in run_all.tables([failed])
    assert "failed" in run_all.balance_note(failed)


def test_a_floor_row_says_unreachable_when_even_the_floor_misses(
    bench: dict[str, ModuleType],
) -> None:
    rows = bench["rows"]
    least_fanout = {"makespan_s": 0.6, "ideal_ratio": 1.2, "max_concurrent": 100}
    fanout = {"ideal_s": 0.5, "least_fanout": {**least_fanout, "reachable": False}}
    (row,) = rows.fanout_floor(fanout)
    assert row[3] == "1.2x ideal" and row[4] == "<= 1.1x" and row[5] == rows.UNREACHABLE
    spawn = {"raw_pooled": {"p50_ms": 0.1}, "least_run": {"p50_ms": 0.14, "ratio_p50": 1.4}}
    assert rows.spawn_floor(spawn, "1.5")[0][5] == rows.REACHABLE
    slower = {**spawn, "least_run": {"p50_ms": 0.2, "ratio_p50": 2.0}}
    assert rows.spawn_floor(slower, "1.5")[0][5] == rows.UNREACHABLE
    ping = {
        "least_mail_ratio_to_raw_ask": 0.45,
        "least_mail_msgs_per_s": 9000,
        "raw_ask_msgs_per_s": 20000,
        "least_durable_ratio_to_floor": 0.8,
        "least_durable_msgs_per_s": 4000,
        "floor_msgs_per_s": 5000,
    }
    in_memory, durable = rows.mail_floors(ping, "0.90")
    assert in_memory[0][5] == rows.UNREACHABLE and durable[0][5] == rows.REACHABLE
    # in seconds: its CPU alone over the target is unreachable as read; its wall time
    # over it but its CPU under it is only not reached at the load it was taken at
    least = {"n": 100_000, "batch": 1000, "start_s": 6.0, "start_cpu_s": 5.0}
    goals = {"start": {"target": 5.0}, "start_one_spawn": {"target": 10.0}}
    assert rows.spawn_many_floor(least, goals, "1.0")[0][5] == rows.UNREACHABLE + rows.BY_CPU
    # the batched floor does less than one `spawn` each must: meeting the one-spawn target
    # settles nothing (it would be a flattering "reachable"); missing it by CPU settles it
    assert rows.one_spawn_floor(least, goals, "1.0")[0][5] == rows.NOT_SETTLED_BATCHED
    assert rows.spawn_many_floor({**least, "start_s": 4.0}, goals, "1.0")[0][5] == rows.REACHABLE
    slow_cpu = {**least, "start_s": 12.0, "start_cpu_s": 11.0}
    assert rows.one_spawn_floor(slow_cpu, goals, "1.0")[0][5] == rows.UNREACHABLE + rows.BY_CPU
    assert rows.one_spawn_floor(None, goals, "1.0") == []
    slow = {**least, "start_s": 12.0}
    assert rows.one_spawn_floor(slow, goals, "1.0")[0][5] == rows.NOT_AT_THIS_LOAD
    # told one each (the path's own floor): its meeting the target settles it, either way
    one = {**least, "batch": 1, "start_s": 8.0, "start_cpu_s": 4.0}
    row = rows.one_spawn_floor(least, goals, "2.0", one)[0]
    assert row[5] == rows.REACHABLE and row[6] == "2.0" and "8.0 s" in row[1]
    slow_one = {**one, "start_s": 11.0, "start_cpu_s": 10.5}
    assert (
        rows.one_spawn_floor(None, goals, "1.0", slow_one)[0][5] == rows.UNREACHABLE + rows.BY_CPU
    )
    # the close's floor
    closes = {"close": {"target": 3.0}}
    least_close = {"n": 100_000, "close_s": 1.5, "close_cpu_s": 1.2}
    assert rows.close_floor(least_close, closes, "1.0")[0][5] == rows.REACHABLE
    slow_close = {**least_close, "close_s": 3.5}
    assert rows.close_floor(slow_close, closes, "1.0")[0][5] == rows.NOT_AT_THIS_LOAD
    assert rows.close_floor({**slow_close, "close_cpu_s": 3.1}, closes, "1.0")[0][5] == (
        rows.UNREACHABLE + rows.BY_CPU
    )
    assert rows.close_floor(None, closes, "1.0") == []


def test_a_floor_read_loaded_says_so_unless_its_cpu_settles_it(
    bench: dict[str, ModuleType],
) -> None:
    run_all, rows = bench["run_all"], bench["rows"]
    ping = {
        "least_mail_ratio_to_raw_ask": 0.6,
        "least_mail_msgs_per_s": 12000,
        "raw_ask_msgs_per_s": 20000,
    }
    ((quiet,), _) = rows.mail_floors(ping, "0.90")
    ((loud,), _) = rows.mail_floors(ping, "**9.00 loaded**")
    assert run_all._quiet_verdict(quiet)[5] == rows.REACHABLE
    assert run_all._quiet_verdict(loud)[5] == rows.REACHABLE + rows.LOADED
    least = {"n": 100_000, "batch": 1000, "start_s": 6.0, "start_cpu_s": 5.0}
    (by_cpu,) = rows.spawn_many_floor(least, {"start": {"target": 5.0}}, "**9.00 loaded**")
    assert run_all._quiet_verdict(by_cpu)[5] == rows.UNREACHABLE + rows.BY_CPU


def test_a_least_mail_step_that_raises_fails_the_run_and_stops_its_actors(
    bench: dict[str, ModuleType], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sender's commit that raises (a full disk, say) ends the measurement with an error
    naming it, and the agents still stop (the line goes on answering their stops) rather
    than the benchmark hanging in its ``finally``."""
    least = bench["mail"]
    monkeypatch.setattr(least, "WAIT", 0.5)  # (the ping-pong stalls for good: not a race)
    seen: list[str] = []

    def commit(mail: Any) -> None:
        seen.append(mail.mail_id)
        if len(seen) == 3:
            raise OSError("disk full")

    with pytest.raises(RuntimeError, match="did not finish") as raised:
        least.least_mail_pingpong(40, commit)
    assert isinstance(raised.value.__cause__, OSError)
    assert len(seen) == 3
