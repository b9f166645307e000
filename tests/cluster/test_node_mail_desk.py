"""A node's side of mail between its runs (actors/remote.py ``NodeRuns`` with ``NodeMail``),
in one process, no Ray: the test plays the driver, reading what the node's outbox carries
and answering its asks. Real agent actors and function agents on the node's dispatcher.

What it pins down: where senders record their mail, the node hands a mail to its recipient
only once the driver has answered that it is recorded (``RecordMails``), so a recipient acts
only on recorded mail; a record answered too late sends the mail by the supervisor under
the record's mail id (kept once by the store); in memory, the mail is handed over at once
and the driver hears of it after (``MailPosted``); mail for a run the node does not host
goes by the supervisor."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from subagents.actors.remote import (
    RECORD_TIMEOUT_S,
    Answer,
    Asked,
    NodeMail,
    NodeRuns,
    RecordMails,
    Told,
)
from subagents.behaviour.function import AgentContext, FunctionBehaviour
from subagents.definitions.spec import AgentSpec
from subagents.messages import Batch, Mail, MailPosted, RunRecord, SendMail
from subagents.store.sqlite import SQLiteStore
from subagents.supervision.effects import StartRun
from subagents.supervision.limits import Limits

WAIT_S = 30.0


class Node:
    """A ``NodeRuns`` and the driver's side of its outbox, played by the test."""

    def __init__(
        self,
        functions: dict[str, Callable[..., Any]],
        senders_record: bool,
        record_timeout_s: float = RECORD_TIMEOUT_S,
    ) -> None:
        def behaviour_for(spec: AgentSpec) -> Any:
            return functools.partial(FunctionBehaviour, functions[spec.name])

        mail = NodeMail(Limits(), senders_record, record_timeout_s)
        self.runs = NodeRuns(behaviour_for, mail)
        self.told: list[Any] = []

    def start(self, run_id: str, agent: str, task: str, root: str | None = None) -> None:
        record = RunRecord(
            run_id=run_id,
            agent=agent,
            task=task,
            parent_run_id=root,
            root_run_id=root or run_id,
            depth=1 if root else 0,
        )
        spec = AgentSpec(name=agent, description="d")
        self.runs.deliver([StartRun(record=record, spec=spec, deadline=time.time() + WAIT_S)])

    def next_ask(self) -> Asked:
        """The next ask in the outbox (what is told meanwhile is kept in ``told``)."""
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            for item in self.runs.outbox.take(100, 0.5):
                if type(item) is Asked:
                    return item
                self.told.extend(_flat(item.message))
        raise AssertionError(f"no ask in the outbox; told: {self.told}")

    def told_until(self, done: Callable[[list[Any]], bool]) -> list[Any]:
        deadline = time.monotonic() + WAIT_S
        while not done(self.told) and time.monotonic() < deadline:
            for item in self.runs.outbox.take(100, 0.5):
                assert type(item) is Told, f"an unexpected ask: {item}"
                self.told.extend(_flat(item.message))
        assert done(self.told), f"told: {self.told}"
        return self.told


def _flat(message: Any) -> list[Any]:
    return list(message.messages) if type(message) is Batch else [message]


def agents(got: list[str], heard: threading.Event) -> dict[str, Callable[..., Any]]:
    async def sender(ctx: AgentContext) -> str:
        await ctx.send(ctx.task, "hello")
        return "sent"

    async def recipient(ctx: AgentContext) -> str:
        mail: Mail | None = await ctx.receive(timeout=WAIT_S)
        assert mail is not None
        got.append(mail.content)
        heard.set()
        return "heard"

    return {"sender": sender, "recipient": recipient}


def test_a_recipient_on_the_node_is_handed_mail_only_once_the_driver_recorded_it() -> None:
    got: list[str] = []
    heard = threading.Event()
    node = Node(agents(got, heard), senders_record=True)
    try:
        node.start("r-1", "recipient", "listen")
        node.start("s-1", "sender", "r-1", root="r-1")
        asked = node.next_ask()
        assert type(asked.message) is RecordMails
        (mail,) = asked.message.mails
        assert (mail.sender, mail.recipient, mail.content) == ("s-1", "r-1", "hello")
        # unanswered: not handed over, and the driver was told nothing of it yet
        assert not heard.wait(1.0)
        assert not any(type(m) in (MailPosted, SendMail) for m in node.told)
        node.runs.supervisor.answer([Answer(asked.key)])  # recorded
        assert heard.wait(WAIT_S) and got == ["hello"]
        told = node.told_until(lambda t: any(type(m) is MailPosted for m in t))
        (posted,) = [m for m in told if type(m) is MailPosted]
        assert posted.recorded and posted.mails == (mail,) and posted.delivered_to == (1,)
    finally:
        node.runs.close()


def test_mail_the_driver_could_not_record_goes_by_the_supervisor() -> None:
    got: list[str] = []
    heard = threading.Event()
    node = Node(agents(got, heard), senders_record=True)
    try:
        node.start("r-1", "recipient", "listen")
        node.start("s-1", "sender", "r-1", root="r-1")
        asked = node.next_ask()
        node.runs.supervisor.answer([Answer(asked.key, error="StoreError: the disk is full")])
        told = node.told_until(lambda t: any(type(m) is SendMail for m in t))
        assert not any(type(m) is MailPosted for m in told)
        assert not heard.is_set()  # the supervisor decides it now; this driver never does
    finally:
        node.runs.close()


def test_a_record_answered_late_sends_the_mail_by_the_supervisor_under_the_same_id(
    tmp_path: Path,
) -> None:
    """The driver's answer to ``RecordMails`` comes after the sender stopped waiting (and then
    a second time): the mail goes by the supervisor named by the record's mail id, the late
    answers hand the recipient nothing, and the driver's store, given the record and the
    supervisor's write of the same mail, keeps it once."""
    got: list[str] = []
    heard = threading.Event()
    node = Node(agents(got, heard), senders_record=True, record_timeout_s=0.2)
    store = SQLiteStore(tmp_path / "runs.db")
    try:
        node.start("r-1", "recipient", "listen")
        node.start("s-1", "sender", "r-1", root="r-1")
        asked = node.next_ask()
        assert type(asked.message) is RecordMails
        (recorded,) = asked.message.mails
        told = node.told_until(lambda t: any(type(m) is SendMail for m in t))
        (sent,) = [m for m in told if type(m) is SendMail]
        assert sent.mail_id == recorded.mail_id and sent.to == "r-1"
        assert not any(type(m) is MailPosted for m in told)
        store.save_mails(asked.message.mails)  # the driver wrote it after all, late
        node.runs.supervisor.answer([Answer(asked.key), Answer(asked.key)])
        assert not heard.wait(1.0)  # the late answers deliver nothing: the supervisor will
        by_supervisor = msgspec.structs.replace(recorded, sent_at=recorded.sent_at + 1)
        store.save_mails([by_supervisor])  # the supervisor's record (``SendMail.mail_id``)
        assert store.mail_for("r-1") == [recorded]
    finally:
        node.runs.close()
        store.close()


def test_in_memory_mail_is_handed_over_at_once_and_the_driver_hears_of_it_after() -> None:
    got: list[str] = []
    heard = threading.Event()
    node = Node(agents(got, heard), senders_record=False)
    try:
        node.start("r-1", "recipient", "listen")
        node.start("s-1", "sender", "r-1", root="r-1")
        assert heard.wait(WAIT_S) and got == ["hello"]  # nothing answered by the driver
        told = node.told_until(lambda t: any(type(m) is MailPosted for m in t))
        (posted,) = [m for m in told if type(m) is MailPosted]
        assert not posted.recorded and [m.content for m in posted.mails] == ["hello"]
        assert not any(type(m) is SendMail for m in told)
    finally:
        node.runs.close()


def test_mail_for_a_run_this_node_does_not_host_goes_by_the_supervisor() -> None:
    got: list[str] = []
    heard = threading.Event()
    node = Node(agents(got, heard), senders_record=False)
    try:
        node.start("s-1", "sender", "r-elsewhere", root="r-elsewhere")
        told = node.told_until(lambda t: any(type(m) is SendMail for m in t))
        (sent,) = [m for m in told if type(m) is SendMail]
        assert sent.to == "r-elsewhere"
        assert not any(type(m) is MailPosted for m in told)
    finally:
        node.runs.close()


def test_a_run_that_ends_with_reports_held_is_forgotten_by_its_node() -> None:
    """A run's end goes in one Batch with the reports its last handling held (here a spawn
    nobody waits on): the node still sees the end and forgets the run."""

    async def mailer(ctx: AgentContext) -> str:
        ctx.spawn("mailer", "a child left to itself")
        return "spawned"

    node = Node({"mailer": mailer}, senders_record=False)
    try:
        node.start("r1", "mailer", "go")
        told = node.told_until(lambda t: any(type(m).__name__ == "RunFinished" for m in t))
        assert [type(m).__name__ for m in told][-2:] == ["SpawnRequest", "RunFinished"], told
        assert "r1" not in node.runs.live()  # forgotten as the end was told, before it went
    finally:
        node.runs.close()
