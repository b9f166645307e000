"""A root spawn and a run's end that reach the supervisor alone are decided straight
(``actors/alone.py``), without the layers made for many; what they must keep: the events in
order (published before the caller wakes), the answers when the store refuses or a write
breaks, and nothing of the runtime's record of checked requests left behind
(``requests.CheckedRoots``). The failures are real: a store whose ``save_run`` refuses one
run's records (a ``StoreError``: the store failed) or breaks on them (a ``TypeError``: a bug).
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from polling import wait_until
from subagents import FunctionAgent, MemoryStore, Runtime
from subagents.behaviour.function import AgentContext
from subagents.messages import Event, EventKind, RunRecord, RunStatus
from subagents.store.base import RunStore, StoreError
from subagents.supervision.admission import AdmissionError
from subagents.supervision.requests import MAX_NESTING

from .conftest import QUIET

WAIT = 60.0
REFUSED = "refused"  # the task whose records the store refuses
BUGGY = "buggy"  # the task whose records the store breaks on


class RefusingRuns(MemoryStore):
    def save_run(self, record: RunRecord) -> None:
        if record.task == REFUSED:
            raise StoreError("the disk is full")
        if record.task == BUGGY:
            raise TypeError("save_run() broke")
        super().save_run(record)


def _echo(ctx: AgentContext) -> str:
    return ctx.task


AGENTS = [FunctionAgent.create("echo", _echo)]


def test_a_lone_runs_events_are_recorded_and_published_in_order_before_its_caller_wakes() -> None:
    with Runtime(AGENTS) as rt:
        seen: list[tuple[str, EventKind]] = []
        rt.subscribe(lambda event: seen.append((event.run_id, event.kind)))
        for task in ("one", "two"):
            outcome = rt.run("echo", task, wait=WAIT)
            assert outcome.result == task
            run_id = outcome.run_id
            # published on the supervisor's thread before the outcome was handed over
            order = [EventKind.SPAWNED, EventKind.STARTED, EventKind.COMPLETED]
            assert [k for r, k in seen if r == run_id] == order
            kept: list[Event] = rt.store.events(run_id)
            assert [e.kind for e in kept] == order
            record = rt.store.get_run(run_id)
            assert record is not None and record.status is RunStatus.COMPLETED


def test_a_lone_root_spawn_the_store_refuses_is_answered_with_the_stores_error() -> None:
    with Runtime(AGENTS, store=RefusingRuns()) as rt:
        outcome = rt.spawn("echo", REFUSED).result(timeout=WAIT)
        assert outcome.status is RunStatus.FAILED and outcome.error_kind == "store"
        assert "the disk is full" in (outcome.error or "")


def test_a_lone_root_spawn_whose_write_breaks_is_answered_and_the_supervisor_goes_on() -> None:
    with Runtime(AGENTS, store=RefusingRuns()) as rt:
        outcome = rt.spawn("echo", BUGGY).result(timeout=WAIT)
        assert outcome.status is RunStatus.FAILED and outcome.error_kind == "supervisor"
        assert "TypeError: save_run() broke" in (outcome.error or "")
        assert rt.run("echo", "ok", wait=WAIT).result == "ok"


def test_no_checked_request_is_left_behind_by_admitted_or_refused_root_spawns() -> None:
    """Each root spawn the runtime checked is filed for its admission, which takes it; one
    refused before its admission looked (the store failed: every spawn refused) is
    forgotten when its refusal lands (before: kept for the runtime's life)."""
    with Runtime(AGENTS, store=RefusingRuns()) as rt:
        checked = rt.core.admission.checked
        assert rt.run("echo", "ok", wait=WAIT).result == "ok"
        assert not checked.requests
        assert rt.spawn("echo", REFUSED).result(timeout=WAIT).error_kind == "store"
        refused = rt.spawn("echo", "after the store failed")
        try:
            refused.result(timeout=WAIT)
        except AdmissionError as exc:
            assert "the run store failed" in str(exc)
        else:
            raise AssertionError("a spawn after the store failed was not refused")
        assert not checked.requests, checked.requests


def test_a_shared_value_changed_after_the_spawn_is_still_checked_at_its_admission() -> None:
    """A request's ``shared`` values are the caller's objects (``Runtime.spawn`` copies the
    mapping, not what it holds): one changed after ``spawn`` returned, before the supervisor
    took the request, is checked there as before (``request_fields``), not taken as checked
    by the caller. The supervisor is held (publishing the first run's start) meanwhile."""
    gate, held = threading.Event(), threading.Event()

    def hold(event: Event) -> None:
        if event.kind is EventKind.STARTED and not held.is_set():
            held.set()
            assert gate.wait(WAIT)

    with Runtime(AGENTS) as rt:
        rt.subscribe(hold)
        try:
            first = rt.spawn("echo", "first")
            assert held.wait(WAIT)
            value: list[Any] = []
            handle = rt.spawn("echo", "shared", shared={"deep": value})  # fine as checked
            for _ in range(MAX_NESTING + 5):  # then nested past the cap
                value.append([])
                value = value[0]
        finally:
            gate.set()
        assert first.result(timeout=WAIT).result == "first"
        with pytest.raises(AdmissionError, match="nested more than"):
            handle.result(timeout=WAIT)


def test_a_lone_root_spawn_is_decided_after_the_records_waiting_in_the_late_line(
    store: RunStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The record of a straight mail (its sender's ``MailPosted``) waits in the agents'
    line (``LateReports``) without waking the supervisor. A root spawn told after it, to a
    supervisor otherwise idle (no group open, nothing queued), is still not decided straight
    past the line (``alone.receive``: only when nothing is in line): the line is taken
    first, as before any message (``SupervisorActor.on_receive``), so in the store's one
    order of events the mail's ``mail_sent`` and ``mail_delivered`` come before the later
    run's ``spawned``. Decided straight, its ``spawned`` came first, the mail's record
    after it (taken at the supervisor's next message). No timer tells the supervisor
    anything meanwhile (the line's, a lingering group's, the deadline tick: an hour away)."""
    monkeypatch.setattr("subagents.actors.group_linger.LINGER_S", 3600.0)
    monkeypatch.setattr("subagents.actors.deadlines.TICK_S", 3600.0)
    ready, go, sent = threading.Event(), threading.Event(), threading.Event()
    child: list[str] = []

    async def receiver(ctx: AgentContext) -> str:
        await ctx.receive(timeout=WAIT)
        await ctx.receive(timeout=WAIT)  # (nothing comes: the close ends it)
        return "done"

    async def sender(ctx: AgentContext) -> str:
        child.append(await ctx.spawn("receiver", "r", background=True))
        ready.set()
        assert go.wait(WAIT)  # (its reports of this handling wait with it)
        await ctx.send(child[0], "hello")  # by run id: straight; its record put in line
        sent.set()
        await ctx.receive(timeout=WAIT)  # (a record too: nothing wakes the supervisor)
        return "done"

    agents = [
        *AGENTS,
        FunctionAgent.create("receiver", receiver),
        FunctionAgent.create("sender", sender),
    ]
    with Runtime(agents, store=store, **QUIET) as rt:
        rt.spawn("sender", "s")
        assert ready.wait(WAIT)
        # Each status an ask: all told before it decided, the open group committed.
        wait_until(lambda: rt.status(child[0]).status is RunStatus.WAITING, "the receiver waits")
        supervisor: Any = rt._hosting.supervisor
        late = supervisor._ref._actor_weakref().late  # (pykka holds its actor weakly)
        assert not late  # nothing in line yet
        go.set()
        assert sent.wait(WAIT)
        assert late  # the mail's record, in line (put before its sender heard it went)
        later = rt.spawn("echo", "later")  # told, to a supervisor with nothing else to do
        assert later.result(timeout=WAIT).result == "later"
        rt.status(child[0])  # (the line taken, its group committed: the record is kept)
        order = [(s.event.run_id, s.event.kind) for s in store.events_after(0, limit=10_000)]
        spawned_later = order.index((later.run_id, EventKind.SPAWNED))
        (mail_sent,) = [i for i, (_, kind) in enumerate(order) if kind is EventKind.MAIL_SENT]
        delivered = order.index((child[0], EventKind.MAIL_DELIVERED))
        assert mail_sent < spawned_later and delivered < spawned_later, order


def test_a_runs_end_behind_records_in_the_late_line_is_decided_after_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A run's end comes to the supervisor as its wake-up's one report in the agents' line
    (``ReportsDue``), and is decided straight when it is alone there (``alone.receive``,
    ``LateReports.end_alone``). Behind a record that waits in the line (a straight mail's
    ``MailPosted``, put without waking the supervisor, its timer an hour away here) it is
    not alone: the record is decided first, so the mail's ``mail_sent`` and
    ``mail_delivered`` come before the sender's ``completed`` in the store's one order of
    events. Taken straight past the record, its ``completed`` came first, the mail's record
    after (at the supervisor's next message)."""
    monkeypatch.setattr("subagents.actors.deadlines.TICK_S", 3600.0)
    ready, go = threading.Event(), threading.Event()
    child: list[str] = []

    async def receiver(ctx: AgentContext) -> str:
        await ctx.receive(timeout=WAIT)
        await ctx.receive(timeout=WAIT)  # (nothing comes: the close ends it)
        return "done"

    async def sender(ctx: AgentContext) -> str:
        child.append(await ctx.spawn("receiver", "r", background=True))
        ready.set()
        assert go.wait(WAIT)
        await ctx.send(child[0], "hello")  # by run id: straight; its record put in line
        return "sent"  # its end: put in line after the record, and the supervisor woken

    agents = [FunctionAgent.create("receiver", receiver), FunctionAgent.create("sender", sender)]
    store = MemoryStore()  # (groups do not linger: where an end alone is decided straight)
    with Runtime(agents, store=store, **QUIET) as rt:
        handle = rt.spawn("sender", "s")
        assert ready.wait(WAIT)
        wait_until(lambda: rt.status(child[0]).status is RunStatus.WAITING, "the receiver waits")
        supervisor: Any = rt._hosting.supervisor
        late = supervisor._ref._actor_weakref().late  # (pykka holds its actor weakly)
        late.delay = 3600.0  # a record in line waits for the supervisor's next message
        go.set()
        assert handle.result(timeout=WAIT).result == "sent"
        rt.status(child[0])  # (an ask: whatever was left in line is taken first)
        order = [(s.event.run_id, s.event.kind) for s in store.events_after(0, limit=10_000)]
        before_the_end = order[: order.index((handle.run_id, EventKind.COMPLETED))]
        assert (handle.run_id, EventKind.MAIL_SENT) in before_the_end, order
        assert (child[0], EventKind.MAIL_DELIVERED) in before_the_end, order
