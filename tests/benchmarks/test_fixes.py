"""Behaviour kept by the performance fixes the benchmarks led to (no timings asserted)."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from pathlib import Path

from subagents.behaviour.function import AgentContext, Pending, PendingAll
from subagents.messages import Event, EventKind, RunStatus
from subagents.runtime import Runtime
from subagents.store.sqlite import SQLiteStore
from subagents.supervision.mailing import event_mail_ids

WAIT = 60.0


def _parts(n: int) -> tuple[Pending, ...]:
    return tuple(Pending(f"p{i}") for i in range(n))


def test_a_gather_resolves_only_when_its_last_part_does_whatever_the_order() -> None:
    parts = _parts(5)
    group = PendingAll("g", parts)
    for i in (3, 1, 4, 2):  # the first part last: the cursor must not skip it
        parts[i].resolve(i * 10)
        group.refresh()
        assert not group.resolved
    parts[0].resolve(0)
    group.refresh()
    assert group.resolved
    assert group.value == [0, 10, 20, 30, 40]


def test_a_gather_of_parts_already_resolved_is_resolved_at_once() -> None:
    parts = _parts(3)
    for i, part in enumerate(parts):
        part.resolve(i)
    assert PendingAll("g", parts).value == [0, 1, 2]
    assert PendingAll("empty", ()).value == []


def test_a_gather_raises_the_first_error_in_order_once_all_are_in() -> None:
    parts = _parts(3)
    group = PendingAll("g", parts)
    second, third = ValueError("second"), KeyError("third")
    parts[2].resolve(error=third)
    group.refresh()
    parts[1].resolve(error=second)
    group.refresh()
    assert not group.resolved  # part 0 is still open
    parts[0].resolve("ok")
    group.refresh()
    assert group.error is second


def test_a_function_agent_reading_mail_reports_waiting_once_not_per_mail() -> None:
    async def inbox(ctx: AgentContext) -> str:
        got = []
        for _ in range(5):
            mail = await ctx.receive(timeout=WAIT)
            got.append(mail.content if mail is not None else "-")
        return ",".join(got)

    waiting: list[Event] = []
    first_wait = threading.Event()

    def on_event(event: Event) -> None:
        if event.kind is EventKind.WAITING:
            waiting.append(event)
            first_wait.set()

    with Runtime([inbox]) as rt:
        rt.subscribe(on_event)
        handle = rt.spawn("inbox", "go")
        assert first_wait.wait(WAIT)
        assert handle.status is RunStatus.WAITING
        for i in range(5):
            handle.send(str(i))
        outcome = handle.result(WAIT)
    assert outcome.result == "0,1,2,3,4"
    assert len(waiting) == 1  # it was: one "waiting" (and one "running") per mail


def test_a_burst_of_mail_through_sqlite_arrives_whole_in_order_and_stored(
    tmp_path: Path,
) -> None:
    """The supervisor commits a burst of mail in grouped transactions: nothing is lost or
    reordered, and every effect of a mail (here its event, published on the supervisor's
    thread) comes after the commit: another connection, which sees only committed rows,
    already finds the mail when its ``mail_delivered`` event is published."""
    n = 300
    db = tmp_path / "runs.db"
    seen: dict[str, int] = {}

    async def sender(ctx: AgentContext) -> str:
        sends = [ctx.send("receiver", f"m{i}") for i in range(n)]
        await sends[-1]  # acknowledged in order: the last ack comes after every other
        with contextlib.closing(sqlite3.connect(db)) as other:
            row = other.execute("SELECT count(*) FROM mail WHERE sender = ?", (ctx.run_id,))
            seen["committed"] = row.fetchone()[0]
        return "sent"

    async def receiver(ctx: AgentContext) -> str:
        got = []
        for _ in range(n):
            mail = await ctx.receive(timeout=WAIT)
            got.append(mail.content if mail is not None else "-")
        return ",".join(got)

    async def root(ctx: AgentContext) -> str:
        received, _ = await ctx.gather(ctx.spawn("receiver", "in"), ctx.spawn("sender", "out"))
        return str(received.result)

    published: list[str] = []
    uncommitted: list[str] = []

    def on_event(event: Event) -> None:
        if event.kind is EventKind.MAIL_DELIVERED:
            mail_ids = event_mail_ids(event.data)  # one event for the mails of one step
            published.extend(mail_ids)
            with contextlib.closing(sqlite3.connect(db)) as other:
                for mail_id in mail_ids:
                    found = other.execute("SELECT 1 FROM mail WHERE mail_id = ?", (mail_id,))
                    if found.fetchone() is None:
                        uncommitted.append(mail_id)

    store = SQLiteStore(db)
    agents = {"root": root, "sender": sender, "receiver": receiver}
    with Runtime(agents, store=store) as rt:
        rt.subscribe(on_event)
        outcome = rt.run("root", "go", wait=WAIT)
    store.close()
    assert outcome.result == ",".join(f"m{i}" for i in range(n))  # all, in order
    assert seen["committed"] == n
    assert len(published) == n
    assert uncommitted == []
