"""A sender's durable mail is fenced by its runtime's lease: once another process took the
lease (a takeover releases it), the sender's own record of a mail (``store.sqlite_record``:
one statement, its lease checked by a view the taking made, ``store.lease_fences``) commits
nothing, though the statement was compiled and cached while the lease was held.

No race with the lease keeper: its next renewal is 200 s away, so only the fence in the
record's statement can keep the mail out of the store (test_fencing holds a stalled host to
the same for its runs' ends)."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest
import structlog

from polling import wait_until
from subagents import Runtime, ScriptedModel
from subagents.behaviour.function import AgentContext
from subagents.messages import Event, EventKind, Mail, RunStatus
from subagents.store import lease_fences
from subagents.store.sqlite import SQLiteStore

WAIT = 60.0


def _contents(path: Path) -> list[str]:
    """The contents of the mail kept in the file at ``path`` (read from their documents)."""
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("SELECT json_extract(mail, '$.content') FROM mail ORDER BY seq")
        return [str(row[0]) for row in rows]
    finally:
        conn.close()


@pytest.mark.parametrize("takeover", ["released", "taken_again"])
def test_a_senders_mail_after_its_lease_was_taken_is_not_committed(
    tmp_path: Path, takeover: str, every_log: structlog.testing.LogCapture
) -> None:
    """The sender records its first mail (the statement compiled, its fence's view found),
    then waits; another process releases the runtime's lease as a takeover does (or the
    owner's lease is taken again, at a later epoch); the sender's second mail is refused by
    the store, which says ``Fenced`` (the sender then hands it to its supervisor, held, and
    so fenced too): the file keeps the first alone."""
    path = tmp_path / "runs.db"
    gate, waiting = threading.Event(), threading.Event()
    held, release = threading.Event(), threading.Event()

    def hold(event: Event) -> None:
        """The supervisor's thread held from its first mail's events (committed) until the
        second mail's record was tried: the store's fence alone stands in its way, not a
        supervisor finding its lease gone first and stopping the runs."""
        if event.kind is EventKind.MAIL_DELIVERED and not held.is_set():
            held.set()
            release.wait(WAIT)

    async def receiver(ctx: AgentContext) -> str:
        got: list[str] = []
        for _ in range(2):
            mail: Mail | None = await ctx.receive(timeout=WAIT)
            if mail is None:
                break
            got.append(mail.content)
        return ",".join(got)

    async def sender(ctx: AgentContext) -> str:
        await ctx.send(ctx.task, "one")
        waiting.set()
        assert gate.wait(WAIT)
        await ctx.send(ctx.task, "two")
        return "sent"

    async def root(ctx: AgentContext) -> str:
        receiver_id: str = await ctx.spawn("receiver", "r", background=True)
        out = await ctx.spawn("sender", receiver_id)
        return str(out.result)

    agents = {"root": root, "receiver": receiver, "sender": sender}
    store = SQLiteStore(path)
    with Runtime(agents, model=ScriptedModel(), store=store, lease_s=600) as rt:
        try:
            rt.subscribe(hold)
            handle = rt.spawn("root", "go")
            assert waiting.wait(WAIT) and held.wait(WAIT)
            wait_until(lambda: _contents(path) == ["one"], "the first mail kept", timeout=WAIT)
            taker = SQLiteStore(path)
            (epoch,) = [lease.epoch for lease in taker.leases() if lease.owner == rt.owner]
            assert lease_fences.view_of(epoch) in _views(path)
            if takeover == "released":
                with taker.batch():
                    taker.release_lease(rt.owner)  # what a resume that took its runs over does
            else:
                lease = next(lease for lease in taker.leases() if lease.owner == rt.owner)
                taker.acquire_lease(lease)  # the owner's lease taken again (a later epoch)
            taker.close()
            assert lease_fences.view_of(epoch) not in _views(path)
            gate.set()
            wait_until(lambda: _refused(every_log) or len(_contents(path)) > 1, "the record tried")
            assert len(_contents(path)) == 1 and "Fenced(" in _refused(every_log)
            release.set()
            outcome = handle.result(timeout=WAIT)
            assert outcome.status is not RunStatus.COMPLETED
        finally:
            gate.set()  # (neither left waiting)
            release.set()
    assert _contents(path) == ["one"]
    store.close()


def _refused(logs: structlog.testing.LogCapture) -> str:
    """The error the sender's record of its mail met, once it met one."""
    said = "recording mail failed; sent by the supervisor"
    return next((str(e["error"]) for e in list(logs.entries) if e["event"] == said), "")


def _views(path: Path) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        return [
            row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'view'")
        ]
    finally:
        conn.close()
