"""A function agent's ``receive`` that waits is one journal entry, not two: its call's entry
is put off (``FunctionBehaviour.unjournaled``) until it is answered, whose entry (the mail it
took, or its timeout) says the call too, or until the function makes another call first,
whose entry it then goes ahead of, so a replay still finds every call before a journaled one
at its position. Real runtime, real actors, both kinds of store."""

from __future__ import annotations

import pytest

from polling import wait_until
from subagents.behaviour.function import AgentContext, FunctionAgent
from subagents.messages import EventKind, JournalEntry, RunStatus
from subagents.runtime import Runtime
from subagents.store.base import RunStore

from .conftest import WAIT, Events

pytestmark = pytest.mark.usefixtures("no_new_threads")


async def listener(ctx: AgentContext) -> str:
    """Takes a mail by waiting, then waits again (its journal read meanwhile: an ended run's
    is forgotten by the memory store)."""
    mail = await ctx.receive(timeout=WAIT)
    await ctx.receive(timeout=WAIT)
    return mail.content if mail is not None else "no mail"


async def impatient(ctx: AgentContext) -> str:
    """Times out, then waits for mail."""
    mail = await ctx.receive(timeout=0.01)
    await ctx.receive(timeout=WAIT)
    return "timed out" if mail is None else mail.content


async def idle(ctx: AgentContext) -> str:
    await ctx.receive(timeout=WAIT * 3)
    return "woke"


def _journal_once_made(store: RunStore, run_id: str) -> list[JournalEntry]:
    """The run's journal once it has any entry (a handling's entries come in one report)."""
    wait_until(lambda: store.journal_of(run_id), "a journal entry")
    return store.journal_of(run_id)


def test_a_receive_answered_by_mail_after_waiting_is_one_journal_entry(store: RunStore) -> None:
    events = Events()
    with Runtime([listener], store=store) as rt:
        rt.subscribe(events)
        handle = rt.spawn("listener", "wait")
        events.wait_count(EventKind.WAITING, "listener", 1)
        rt.send(handle.run_id, "hello")
        journal = _journal_once_made(store, handle.run_id)
        (mail,) = store.mail_for(handle.run_id)
        rt.send(handle.run_id, "done")
        outcome = handle.result(timeout=WAIT)
        assert outcome.status is RunStatus.COMPLETED and outcome.value == "hello", outcome
    # one entry for the first receive; none yet for the second, still waiting
    assert journal == [
        JournalEntry(
            request_id=f"{handle.run_id}:0", kind="receive", observed=True, result=mail.mail_id
        )
    ]


def test_a_receive_that_timed_out_is_one_journal_entry(store: RunStore) -> None:
    with Runtime([impatient], store=store) as rt:
        handle = rt.spawn("impatient", "wait")
        journal = _journal_once_made(store, handle.run_id)
        rt.send(handle.run_id, "done")
        outcome = handle.result(timeout=WAIT)
        assert outcome.status is RunStatus.COMPLETED and outcome.value == "timed out", outcome
    assert journal == [JournalEntry(request_id=f"{handle.run_id}:0", kind="receive", observed=True)]


def test_a_waiting_receive_is_journaled_ahead_of_a_later_call_and_replays(
    store: RunStore,
) -> None:
    """Without its entry ahead of the spawn's, the restarted start would find the spawn's
    entry and none for the receive before it: a replay that diverges at call 0."""
    starts: list[int] = []

    async def boss(ctx: AgentContext) -> str:
        starts.append(1)
        waiting = ctx.receive(timeout=WAIT)  # no mail yet: it waits, not awaited
        await ctx.spawn("idle", "x", background=True)
        if len(starts) == 1:
            raise RuntimeError("crash after the spawn, the receive still waiting")
        mail = await waiting
        return mail.content if mail is not None else "no mail"

    events = Events()
    agents = [FunctionAgent.create("boss", boss, restart="transient"), idle]
    with Runtime(agents, store=store) as rt:
        rt.subscribe(events)
        handle = rt.spawn("boss", "go")
        events.wait_count(EventKind.RESTARTED, "boss", 1)
        journal = store.journal_of(handle.run_id)  # the first start's (before its end)
        rt.send(handle.run_id, "hello")
        outcome = handle.result(timeout=WAIT)
        assert outcome.status is RunStatus.COMPLETED and outcome.value == "hello", outcome
        assert len(starts) == 2
        assert len(rt.runs(agent="idle")) == 1  # spawned once: replayed, not spawned again
    first, spawned = journal[0], journal[1]
    assert (first.request_id, first.kind, first.observed) == (
        f"{handle.run_id}:0",
        "receive",
        False,
    )
    assert (spawned.request_id, spawned.kind) == (f"{handle.run_id}:1", "spawn")
