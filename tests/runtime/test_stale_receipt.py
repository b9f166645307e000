"""A read receipt from a start that is over, with real actors and a real SQLite file: a
parent (``restart: transient``) is restarted (its ``fail_parent`` child failed) while its
first start is still in the handling that read a mail; that start's journal (the receive,
its read receipt) reaches the supervisor after the restart. The mail was handed to the
next start too, which has not read it yet: it must stay unread in the store (a crash now
would otherwise lose it: a resume hands over only unread mail), and in the run's inbox."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from subagents.behaviour.function import AgentContext, FunctionAgent
from subagents.messages import EventKind, Mail, MailState
from subagents.runtime import Runtime
from subagents.store.sqlite import SQLiteStore

from .conftest import WAIT, Events

pytestmark = pytest.mark.usefixtures("no_new_threads")


def test_a_late_receipt_of_an_earlier_start_leaves_the_mail_unread(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    events = Events()
    fail, old_may_go, new_may_read = threading.Event(), threading.Event(), threading.Event()
    old_done, new_started, first_read = threading.Event(), threading.Event(), threading.Event()
    starts: list[int] = []
    read: list[str] = []

    async def doomed(ctx: AgentContext) -> str:
        assert fail.wait(WAIT)
        raise RuntimeError("the child failed")

    async def parent(ctx: AgentContext) -> str:
        starts.append(1)
        # (the restart replays it: the child of the first start)
        await ctx.spawn("doomed", "fail", background=True, on_failure="fail_parent")
        if len(starts) == 2:  # the restart: holds the mail, unread, until the test says
            new_started.set()
            assert new_may_read.wait(WAIT)
        mail: Mail | None = await ctx.receive(timeout=WAIT)
        assert mail is not None
        read.append(mail.content)
        if len(starts) == 1:  # still in the handling that read it: the journal is held
            first_read.set()
            assert old_may_go.wait(WAIT)
            try:  # told after the journal, in the same report: answered once it is decided
                await ctx.spawn("doomed", "again", background=True)
            finally:
                old_done.set()
        return "read"

    async def root(ctx: AgentContext) -> str:
        await ctx.spawn("parent", "p", background=True)
        got: Mail | None = await ctx.receive(timeout=WAIT)  # the parent's end
        return "ended" if got is not None else "no end heard"

    agents = [
        FunctionAgent.create("root", root),
        FunctionAgent.create("parent", parent, restart="transient", restart_backoff=0.0),
        FunctionAgent.create("doomed", doomed),
    ]
    try:
        with Runtime(agents, store=store) as rt:
            rt.subscribe(events)
            rt.spawn("root", "go")
            events.wait_count(EventKind.STARTED, "parent", 1)
            (parent_run,) = rt.runs(agent="parent")
            mail_id = rt.send(parent_run.run_id, "the mail")
            assert first_read.wait(WAIT)  # the first start read it
            fail.set()
            events.wait_count(EventKind.RESTARTED, "parent", 1)
            assert new_started.wait(WAIT)  # handed the mail, not read
            old_may_go.set()
            assert old_done.wait(WAIT)  # the old start's journal is decided
            (kept,) = [m for m in store.mail_for(parent_run.run_id) if m.mail_id == mail_id]
            assert kept.state is MailState.DELIVERED, kept
            new_may_read.set()
            events.wait_count(EventKind.COMPLETED, "parent", 1)
            assert read == ["the mail", "the mail"]
            (kept,) = [m for m in store.mail_for(parent_run.run_id) if m.mail_id == mail_id]
            assert kept.state is MailState.READ, kept
    finally:
        fail.set()
        old_may_go.set()
        new_may_read.set()
        store.close()
