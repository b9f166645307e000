"""A mail made a dead letter after its reader's receipt committed, before the supervisor heard
of the receipt: what the store shows of it, and what `subagents log` and the console say of
its ``dead_letter`` event, agree.

The window: a reader's record (its reply, sent straight, carrying the receipt of the mail it
read: schema v15) commits on the reader's thread, and the report of it reaches the
supervisor after; a stop handled in between ends the reader with the mail still unread in
the supervisor's memory, so the end makes it a dead letter (its ``dead_letter`` event
published, its sender told). Which write is wrong: the dead one, made on what the supervisor
had not heard yet; the receipt is what happened (the reader's function was handed the mail
and answered it). docs/runtime.md ("every mail is read or comes back") keeps it so on
purpose: the event and the notice mean "not known read when the run ended", and the receipt
landing after marks it read (tests/supervision/test_stale_receipts.py), so a sender that
must not have the work done twice reads the mail's state. v15 reads it ``read`` from the
moment its receipt committed (v14: ``dead`` until the supervisor's late receipt landed).
What disagreed was the transcript: `subagents log` and the console's run page said of the
event "was never read" beside a mail that reads ``read``; now they say it was not known read
when its run ended and its receipt came after (``cli/transcript._dead_fate``).

The window is held open by the store (a ``SQLiteStore`` whose sender's record, once
committed, waits for the test before returning to the reader's thread).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from polling import wait_until
from subagents import FunctionAgent, Runtime
from subagents.behaviour.function import AgentContext
from subagents.cli import log_cmd
from subagents.messages import EventKind, MailState, RunStatus
from subagents.store.sqlite import SQLiteStore

WAIT = 60.0


class HeldAfterReceipt(SQLiteStore):
    """A sender's record carrying a receipt, once committed, waits for ``release``."""

    committed = threading.Event()
    release = threading.Event()

    def save_mails_fenced(self, *args: Any, **kwargs: Any) -> None:
        super().save_mails_fenced(*args, **kwargs)
        read: Sequence[str] = kwargs.get("read", args[6] if len(args) > 6 else ())
        if read and not self.committed.is_set():
            self.committed.set()
            assert self.release.wait(WAIT)


def test_a_mail_dead_after_its_receipt_committed_reads_read_and_the_log_says_so(
    tmp_path: Path,
) -> None:
    store = HeldAfterReceipt(tmp_path / "runs.db")
    child: list[str] = []
    ready = threading.Event()

    async def reader(ctx: AgentContext) -> str:
        mail = await ctx.receive(timeout=WAIT)
        assert mail is not None
        await ctx.send(ctx.parent_run_id or "", f"read {mail.content}")  # carries the receipt
        return "done"

    async def lead(ctx: AgentContext) -> str:
        child.append(await ctx.spawn("reader", "r", background=True))
        ready.set()
        await ctx.receive(timeout=WAIT)
        return "done"

    agents = [FunctionAgent.create("reader", reader), FunctionAgent.create("lead", lead)]
    try:
        with Runtime(agents, store=store, command_poll_s=0) as rt:
            top = rt.spawn("lead", "x")
            assert ready.wait(WAIT)
            read = child[0]
            wait_until(lambda: (r := store.get_run(read)) and r.started_at, "the reader started")
            mail_id = rt.send(read, "m")
            assert HeldAfterReceipt.committed.wait(WAIT)  # the receipt is in the store
            try:
                rt.stop(read)  # the supervisor has not heard of it
            finally:
                HeldAfterReceipt.release.set()
            top.result(timeout=WAIT)
        record = store.get_run(read)
        assert record is not None and record.status is RunStatus.CANCELLED, record
        dead = [
            e.data.get("mail_id") for e in store.events(read) if e.kind is EventKind.DEAD_LETTER
        ]
        assert dead == [mail_id]  # the end made it a dead letter, and said so
        (shown,) = [m for m in store.mail_for(read) if m.mail_id == mail_id]
        assert shown.state is MailState.READ  # what happened: its receipt committed first
        _, entries = log_cmd.read(store, read, final=True)  # `subagents log`, the console
        (said,) = [e for e in entries if e.kind == "dead_letter"]
        assert said.text == (
            f"{mail_id} (external) was not known read when its run ended; its receipt came"
            " after: read: m"
        ), said.text
    finally:
        HeldAfterReceipt.release.set()
        store.close()
