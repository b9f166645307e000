"""A sender's record of the mail it takes straight to its recipient (SQLite: the sender
writes it, in a fenced transaction of its own) commits only while the sender's start is
still its run's (``store.writes.AttemptFence``, checked in that transaction by
``FencedStore.record_mails``): a record held up past its run's end (a timeout, a stop) or
past a retry of its run is refused, mail and carried journal entries alike, so nothing of
a start that is over lands after its end or under the next start's keys.

The record is held in the store's write, before its transaction begins (``HeldStore``), until
the test has seen the supervisor commit the end or the retry (its event), then let go: the
window between the mail desk's check of its directory and the record's transaction, made
wide with real synchronization."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gates import Gate
from held_store import HeldStore
from subagents.behaviour.function import AgentContext, FunctionAgent
from subagents.messages import EventKind, Mail, MailState, RunStatus
from subagents.runtime import Runtime
from subagents.store.fencing import AttemptOver

from .conftest import WAIT, Events

pytestmark = pytest.mark.usefixtures("no_new_threads")

CONTENT = "from the sender"
TIMEOUT_S = 3.0
"""The sender's deadline in the timeout case: it records its mail at its first step, well
before (the record is then held until the test has seen it time out)."""
RESTART_BACKOFF_S = 2.0
"""The restart's backoff in the restart case: the refused mail, told to the supervisor as
soon as its record is refused, reaches it well before the restart is due."""


async def sink(ctx: AgentContext) -> str:
    mail: Mail | None = await ctx.receive(timeout=WAIT)
    return "nothing" if mail is None else mail.content


async def sender(ctx: AgentContext) -> str:
    # the sink's id, mailed by its parent: the journal entry of this receive says which mail
    # it took, so it is carried with the straight mail, in the record's transaction
    told: Mail | None = await ctx.receive(timeout=WAIT)
    assert told is not None
    await ctx.send(told.content, CONTENT)
    return "sent"


def _root(timeout: float | None) -> Any:
    async def root(ctx: AgentContext) -> str:
        sink_id: str = await ctx.spawn("sink", "wait", background=True)
        sender_id: str = await ctx.spawn("sender", "send", background=True, timeout=timeout)
        await ctx.send(sender_id, sink_id)
        ended: Mail | None = await ctx.receive(timeout=WAIT)  # the sender's end
        return "ended" if ended is not None else "no end heard"

    return root


@pytest.mark.parametrize("end", ["timed_out", "stopped"])
def test_a_record_held_past_its_runs_end_is_refused(tmp_path: Path, end: str) -> None:
    """The sender's record is held while its run times out (or is stopped) and that end is
    committed; let go, it is refused (``AttemptOver``): the store keeps no delivered mail
    of the ended run, nor the journal entries it carried. (Without the attempt fence it committed
    after the run's end: a mail from a timed-out run, delivered to the sink.)"""
    store = HeldStore(tmp_path / "runs.db", CONTENT, WAIT)
    events = Events()
    timeout = TIMEOUT_S if end == "timed_out" else WAIT
    agents = {"root": _root(timeout), "sink": sink, "sender": sender}
    try:
        with Runtime(agents, store=store) as rt:
            rt.subscribe(events)
            handle = rt.spawn("root", "go")
            assert store.reached.wait(WAIT), "the sender's mail was not recorded by it"
            (sender_run,) = rt.runs(agent="sender")
            (sink_run,) = rt.runs(agent="sink")
            if end == "stopped":
                rt.stop(sender_run.run_id)
            kind = EventKind.TIMED_OUT if end == "timed_out" else EventKind.CANCELLED
            events.wait_count(kind, "sender", 1)  # committed, then published
            store.release.set()
            assert store.done.wait(WAIT)
            outcome = handle.result(WAIT)
            assert outcome.status is RunStatus.COMPLETED, outcome
            assert outcome.result == "ended"
            sent = [m for m in store.mail_for(sink_run.run_id) if m.sender == sender_run.run_id]
            # nothing kept: the refused record wrote nothing, and its mail, refused by the
            # supervisor too, is not named (no dead letter under the send's key)
            kinds = [e.kind for e in store.journal_of(sender_run.run_id)]
            assert "send" not in kinds, kinds
            assert sent == [], sent
            record = store.get_run(sender_run.run_id)
            status = RunStatus.TIMED_OUT if end == "timed_out" else RunStatus.CANCELLED
            assert record is not None and record.status is status
            assert isinstance(store.error, AttemptOver), store.error
            assert "ended" in str(store.error)
    finally:
        store.release.set()
        store.close()


def test_a_record_of_the_start_a_retry_ended_is_refused(tmp_path: Path) -> None:
    """A parent (``on_failure: retry``) whose ``fail_parent`` child fails is retried while
    its first start's record of a mail is held (its thread still in that write): let go
    after the retry is committed, the record is refused, and the run's mail is the second
    start's alone. (Without the attempt fence the first start's mail and journal entries
    landed under the run after the retry: two mails of one send.)"""
    store = HeldStore(tmp_path / "runs.db", CONTENT, WAIT)
    events = Events()
    fail = Gate()
    starts: list[int] = []

    async def doomed(ctx: AgentContext) -> str:
        assert fail.wait(WAIT)
        raise RuntimeError("the child failed")

    async def parent(ctx: AgentContext) -> str:
        starts.append(1)
        if len(starts) == 1:
            await ctx.spawn("doomed", "fail", background=True, on_failure="fail_parent")
        await ctx.send(ctx.task, CONTENT if len(starts) == 1 else "again")
        return "sent"

    async def root(ctx: AgentContext) -> str:
        sink_id: str = await ctx.spawn("sink", "wait", background=True)
        await ctx.spawn("parent", sink_id, on_failure="retry", max_retries=1)
        got: Mail | None = await ctx.receive(timeout=WAIT)  # the sink's end
        return "ended" if got is not None else "no end heard"

    agents = {"root": root, "sink": sink, "parent": parent, "doomed": doomed}
    try:
        with Runtime(agents, store=store) as rt:
            rt.subscribe(events)
            rt.spawn("root", "go")
            assert store.reached.wait(WAIT), "the parent's mail was not recorded by it"
            (parent_run,) = rt.runs(agent="parent")
            (sink_run,) = rt.runs(agent="sink")
            fail.set()
            events.wait_count(EventKind.RESTARTED, "parent", 1)  # the retry, committed
            store.release.set()
            assert store.done.wait(WAIT)
            events.wait_count(EventKind.COMPLETED, "sink", 1)
            sent = [m for m in store.mail_for(sink_run.run_id) if m.sender == parent_run.run_id]
            assert [m.content for m in sent] == ["again"], sent  # nothing of the refused one
            sink_end = store.get_run(sink_run.run_id)
            assert sink_end is not None and sink_end.outcome is not None
            assert sink_end.outcome.result == "again"
            assert isinstance(store.error, AttemptOver), store.error
            assert "retried" in str(store.error)
    finally:
        store.release.set()
        fail.set()
        store.close()


def test_the_mail_of_a_restarted_runs_refused_record_is_sent_by_its_next_start(
    tmp_path: Path,
) -> None:
    """A parent (``restart: transient``) whose ``fail_parent`` child fails is restarted while
    its first start's record of a mail is held: let go, the record is refused. A restart
    keeps the run's call keys (a retry's differ), so the next start, replaying its journal,
    sends that mail itself, under the same key. The refused mail must leave nothing in the
    store under that key: a mail kept there (a dead letter of the refused record) was
    handed to the next start as its send's answer, and the mail was never sent (the sink
    waited in vain). The restart's backoff (``RESTART_BACKOFF_S``) lets the refused mail
    reach the supervisor before the next start reads what its run sent."""
    store = HeldStore(tmp_path / "runs.db", CONTENT, WAIT)
    events = Events()
    fail = Gate()
    starts: list[int] = []

    async def doomed(ctx: AgentContext) -> str:
        assert fail.wait(WAIT)
        raise RuntimeError("the child failed")

    async def parent(ctx: AgentContext) -> str:
        starts.append(1)
        await ctx.spawn("doomed", "fail", background=True, on_failure="fail_parent")
        await ctx.send(ctx.task, CONTENT if len(starts) == 1 else "again")
        return "sent"

    async def root(ctx: AgentContext) -> str:
        sink_id: str = await ctx.spawn("sink", "wait", background=True)
        await ctx.spawn("parent", sink_id)
        got: Mail | None = await ctx.receive(timeout=WAIT)  # the sink's end
        return "ended" if got is not None else "no end heard"

    agents = [
        FunctionAgent.create("root", root),
        FunctionAgent.create("sink", sink),
        FunctionAgent.create(
            "parent", parent, restart="transient", restart_backoff=RESTART_BACKOFF_S
        ),
        FunctionAgent.create("doomed", doomed),
    ]
    try:
        with Runtime(agents, store=store) as rt:
            rt.subscribe(events)
            rt.spawn("root", "go")
            assert store.reached.wait(WAIT), "the parent's mail was not recorded by it"
            (parent_run,) = rt.runs(agent="parent")
            (sink_run,) = rt.runs(agent="sink")
            fail.set()
            events.wait_count(EventKind.RESTARTED, "parent", 1)  # the restart, committed
            store.release.set()
            assert store.done.wait(WAIT)
            assert isinstance(store.error, AttemptOver), store.error
            assert "restarted" in str(store.error)
            events.wait_count(EventKind.COMPLETED, "sink", 1)
            assert len(starts) == 2
            sink_end = store.get_run(sink_run.run_id)
            assert sink_end is not None and sink_end.outcome is not None
            assert sink_end.outcome.result == "again", sink_end.outcome
            sent = store.mail_for(sink_run.run_id)
            assert [(m.content, m.state) for m in sent if m.sender == parent_run.run_id] == [
                ("again", MailState.READ)
            ], sent
    finally:
        store.release.set()
        fail.set()
        store.close()
