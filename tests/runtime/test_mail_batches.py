"""Mail in batches: what one step sends goes together, in order, each mail answered on its own.

An agent's mail reports of one handling reach the supervisor as one Batch, and the
supervisor's deliveries and acknowledgements after a group commit reach each run as one
Batch; these tests hold the promises that must survive that (order, one answer per mail,
dead letters, a blocked sync function's mail, merged read receipts, no timer per receive).
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

import msgspec
import pykka
import pytest

from gates import Gate
from subagents.actors.agent import AgentActor, AgentKit
from subagents.actors.timer import TimerService
from subagents.behaviour.function import AgentContext, FunctionBehaviour, MailError, Pending
from subagents.behaviour.port import AgentPort
from subagents.definitions.spec import AgentSpec
from subagents.messages import (
    Batch,
    DeliverMail,
    EventKind,
    Journal,
    Mail,
    MailAck,
    MailState,
    Outcome,
    RunFinished,
    RunRecord,
    RunStatus,
    SendMail,
    WaitingChanged,
)
from subagents.runtime import Runtime
from subagents.store.base import RunStore
from subagents.supervision.effects import StartRun

from .conftest import WAIT, Events

pytestmark = pytest.mark.usefixtures("no_new_threads")

N = 300
"""More than a group commit holds (GROUP_MAX): one step's sends still go in one core call."""


def test_a_burst_of_sends_arrives_in_order_and_is_acknowledged_in_order(store: RunStore) -> None:
    async def receiver(ctx: AgentContext) -> list[list[str]]:
        got: list[list[str]] = []
        for _ in range(N):
            mail: Mail | None = await ctx.receive(timeout=WAIT)
            assert mail is not None
            got.append([mail.content, mail.mail_id])
        return got

    async def sender(ctx: AgentContext) -> dict[str, Any]:
        sends: list[Pending] = [ctx.send("receiver", str(i)) for i in range(N)]  # one step
        await sends[-1]
        acked_with_last = [p.resolved for p in sends]
        ids: list[str] = await ctx.gather(*sends)
        return {"acked_with_last": acked_with_last, "ids": ids}

    async def root(ctx: AgentContext) -> Any:
        heard, sent = await ctx.gather(ctx.spawn("receiver", "x"), ctx.spawn("sender", "x"))
        return {"heard": heard.result, "sent": sent.result}

    events = Events()
    with Runtime({"root": root, "receiver": receiver, "sender": sender}, store=store) as rt:
        rt.subscribe(events)
        outcome = rt.run("root", "go", wait=WAIT)
        assert outcome.status is RunStatus.COMPLETED, outcome
        both = msgspec.json.decode(outcome.result or "{}")
        heard = msgspec.json.decode(both["heard"])
        sent = msgspec.json.decode(both["sent"])
        assert [content for content, _ in heard] == [str(i) for i in range(N)]
        assert all(sent["acked_with_last"])  # acks come in order: the last one comes last
        assert sent["ids"] == [mail_id for _, mail_id in heard]  # ack i names mail i
        # the step's N sends: one event on each side, every mail id in order
        (sent_event,) = events.of(EventKind.MAIL_SENT, "sender")
        assert sent_event.data["count"] == N
        assert sent_event.data["mail_ids"] == sent["ids"]
        assert sent_event.data["mail_id"] == sent["ids"][0]
        (delivered,) = events.of(EventKind.MAIL_DELIVERED, "receiver")
        assert delivered.data["mail_ids"] == sent["ids"]
        assert delivered.data["sender"] == sent_event.run_id
        (receiver_run,) = rt.runs(agent="receiver")
        mail = rt.store.mail_for(receiver_run.run_id)
        assert [m.content for m in mail] == [str(i) for i in range(N)]
        assert {m.state for m in mail} == {MailState.READ}


def test_a_dead_recipient_in_a_batch_fails_only_its_own_mail(store: RunStore) -> None:
    async def quick(ctx: AgentContext) -> str:
        return "done"

    async def listener(ctx: AgentContext) -> str:
        got = [await ctx.receive(timeout=WAIT) for _ in range(2)]
        return ",".join(m.content if m is not None else "none" for m in got)

    async def sender(ctx: AgentContext) -> list[str]:
        ended: Outcome = await ctx.spawn("quick", "x")
        sends = [
            ctx.send("listener", "one"),
            ctx.send(ended.run_id, "lost"),
            ctx.send("listener", "two"),
        ]
        answers: list[str] = []
        for pending in sends:
            try:
                answers.append(f"id {await pending}")
            except MailError as exc:
                answers.append(f"error {exc}")
        return answers

    async def root(ctx: AgentContext) -> Any:
        heard, sent = await ctx.gather(ctx.spawn("listener", "x"), ctx.spawn("sender", "x"))
        return {"heard": heard.result, "sent": msgspec.json.decode(sent.result or "[]")}

    agents = {"root": root, "listener": listener, "sender": sender, "quick": quick}
    with Runtime(agents, store=store) as rt:
        outcome = rt.run("root", "go", wait=WAIT)
        assert outcome.status is RunStatus.COMPLETED, outcome
        result = msgspec.json.decode(outcome.result or "{}")
        (quick_run,) = rt.runs(agent="quick")
        assert result["heard"] == "one,two"
        first, dead, second = result["sent"]
        assert first.startswith("id m") and second.startswith("id m")
        assert dead == (
            f"error run {quick_run.run_id} has already ended (completed); the mail was kept"
            " as a dead letter and will not be read"
        )
        (kept,) = rt.store.mail_for(quick_run.run_id)
        assert kept.state is MailState.DEAD and kept.content == "lost"


def test_mail_from_a_sync_function_is_delivered_while_the_function_still_runs(
    store: RunStore,
) -> None:
    heard, release = Gate(), Gate()

    def sender(ctx: AgentContext) -> str:
        ctx.send("receiver", "hello")
        assert release.wait(WAIT)  # the function has not returned: its actor is busy
        return "sent"

    async def receiver(ctx: AgentContext) -> str:
        mail: Mail | None = await ctx.receive(timeout=WAIT)
        heard.set()
        return mail.content if mail is not None else "nothing"

    async def root(ctx: AgentContext) -> str:
        got, _ = await ctx.gather(ctx.spawn("receiver", "x"), ctx.spawn("sender", "x"))
        return str(got.result)

    with Runtime({"root": root, "receiver": receiver, "sender": sender}, store=store) as rt:
        handle = rt.spawn("root", "go")
        try:
            assert heard.wait(WAIT), "the mail waited for the sync function to return"
        finally:
            release.set()
        assert handle.result(timeout=WAIT).result == "hello"


def test_the_children_of_one_step_are_all_admitted_before_any_of_them_acts() -> None:
    """A step's spawns reach the supervisor together: a child that mails a sibling by name at
    once finds it, even when the parent is held up between its two spawns. (Told one by one,
    the first child started and mailed before the second was admitted: "no run named
    'critic'"; reproduced here by the lead waiting, inside its step, for the researcher's
    mail to be answered.)"""
    answered = Gate()  # a threading.Event on one process; reached from a node's copy too

    async def lead(ctx: AgentContext) -> str:
        first = ctx.spawn("researcher", "go")
        # Inside the step: the researcher cannot have been told to start yet, so this wait
        # runs out (hold-up between the spawns); told at once, it would have mailed by now.
        answered.wait(2.0)
        second = ctx.spawn("critic", "go")
        outcomes = await ctx.gather(first, second)
        return " / ".join(str(o.result) for o in outcomes)

    async def researcher(ctx: AgentContext) -> str:
        try:
            await ctx.send("critic", "hello critic")
            return "sent"
        except MailError as exc:
            return f"refused: {exc}"
        finally:
            answered.set()

    async def critic(ctx: AgentContext) -> str:
        mail: Mail | None = await ctx.receive(timeout=WAIT)
        return mail.content if mail is not None else "no mail"

    agents = {"lead": lead, "researcher": researcher, "critic": critic}
    with Runtime(agents) as rt:
        outcome = rt.run("lead", "go", wait=WAIT * 3)
    assert outcome.result == "sent / hello critic", outcome
    assert answered.is_set()


# ---- the agent actor's side, with a real actor standing in for the supervisor ----------------


class _Seen:
    """What the stand-in supervisor was told, to wait on."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.items: list[Any] = []

    def wait(self, n: int) -> list[Any]:
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.items) >= n, WAIT), self.items
            return list(self.items)


class _Recorder(pykka.ThreadingActor):
    """Stands in for the supervisor: keeps what the agent tells it."""

    def __init__(self, seen: _Seen) -> None:
        super().__init__()
        self.seen = seen

    def on_receive(self, message: Any) -> None:
        with self.seen.cond:
            self.seen.items.append(message)
            self.seen.cond.notify_all()


class _CountingTimer(TimerService):
    """The real timer service, counting the timers it is asked to arm."""

    def __init__(self) -> None:
        super().__init__()
        self.armed = 0

    def schedule(self, *args: Any) -> None:
        self.armed += 1
        super().schedule(*args)

    def tell_at(self, *args: Any) -> None:  # (a wake: a tell, no callback)
        self.armed += 1
        super().tell_at(*args)


def test_an_agent_sends_one_steps_mail_as_one_batch_and_merges_read_receipts() -> None:
    async def fn(ctx: AgentContext) -> str:
        await ctx.gather(*(ctx.send("peer", str(i)) for i in range(3)))
        got = [await ctx.receive(timeout=WAIT) for _ in range(3)]
        return ",".join(m.content for m in got if m is not None)

    def behaviour(port: AgentPort) -> FunctionBehaviour:
        return FunctionBehaviour(fn, port)

    record = RunRecord(run_id="r1", agent="fn", task="t", root_run_id="r1")
    timer, seen = _CountingTimer(), _Seen()
    recorder = _Recorder.start(seen)
    agent = AgentActor.start(
        StartRun(record=record, spec=AgentSpec(name="fn", description="d"), deadline=0.0),
        threading.Event(),
        AgentKit(supervisor=recorder, timer=timer, behaviour_for=lambda _spec: behaviour),
    )
    try:
        (sends,) = seen.wait(1)
        assert isinstance(sends, Batch)
        # the calls' journal entries, the mail, then "waiting": the step's reports in order
        journal, *rest, waiting = sends.messages
        assert isinstance(waiting, WaitingChanged) and waiting.waiting
        # the calls' journal entries go first, as one report, then the mail
        assert isinstance(journal, Journal)
        assert [e.kind for e in journal.entries] == ["send", "send", "send", "gather"]
        mails: list[SendMail] = list(rest)
        assert [m.content for m in mails] == ["0", "1", "2"]
        agent.tell(
            Batch(messages=tuple(MailAck(request_id=m.request_id, mail_id="x") for m in mails))
        )
        delivered = tuple(
            DeliverMail(
                mails=(Mail(mail_id=f"m{i}", sender="r0", recipient="r1", content=f"c{i}"),)
            )
            for i in range(3)
        )
        agent.tell(Batch(messages=delivered))
        # the receive left waiting after the acks reports nothing of its own: its answer's
        # entry says the call too (FunctionBehaviour.unjournaled)
        _, last = seen.wait(2)
        # the run's end told with the handling's last reports, after them, as one message
        assert isinstance(last, Batch)
        read, finished = last.messages
        assert [e.kind for e in read.entries] == ["receive"] * 3
        # the three receives' results and read receipts: one report
        assert isinstance(read, Journal)
        assert read.read_mail == ("m0", "m1", "m2")
        assert [e.result for e in read.entries if e.observed] == ["m0", "m1", "m2"]
        assert isinstance(finished, RunFinished) and finished.result == "c0,c1,c2"
        # one wake armed (the receive left waiting after the acks), not one per receive
        assert timer.armed == 1
    finally:
        with contextlib.suppress(pykka.ActorDeadError):
            agent.stop(timeout=WAIT)
        recorder.stop(timeout=WAIT)
        timer.stop()
