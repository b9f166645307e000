"""Mail between runs: order per sender, names, dead letters, tree boundaries, replies."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from gates import Gate
from shown import ShownModel
from subagents.behaviour.function import AgentContext, FunctionAgent, MailError
from subagents.behaviour.tools import SPAWN
from subagents.messages import EventKind, Mail, MailState, Outcome, RunStatus
from subagents.models.scripted import ScriptedModel
from subagents.runtime import AgentLike, Runtime
from subagents.store.base import RunStore
from subagents.supervision.limits import Limits

from .conftest import WAIT, Events, requests_of, spec, tool_results

pytestmark = pytest.mark.usefixtures("no_new_threads")


def test_mail_from_one_sender_arrives_in_order(store: RunStore) -> None:
    async def receiver(ctx: AgentContext) -> list[str]:
        got: list[str] = []
        for _ in range(50):
            mail: Mail | None = await ctx.receive(timeout=WAIT)
            assert mail is not None
            got.append(mail.content)
        return got

    async def sender(ctx: AgentContext) -> str:
        # fifty sends in flight at once; acks awaited together
        ids: list[str] = await ctx.gather(*(ctx.send("receiver", str(i)) for i in range(50)))
        return str(len(set(ids)))

    async def root(ctx: AgentContext) -> Any:
        listening = ctx.spawn("receiver", "listen")
        sent: Outcome = await ctx.spawn("sender", "talk")
        heard: Outcome = await listening
        return {"sent": sent.result, "heard": msgspec.json.decode(heard.result or "[]")}

    events = Events()
    with Runtime({"root": root, "receiver": receiver, "sender": sender}, store=store) as rt:
        rt.subscribe(events)
        outcome = rt.run("root", "go", wait=WAIT)
        assert outcome.status is RunStatus.COMPLETED, outcome
        assert msgspec.json.decode(outcome.result or "") == {
            "sent": "50",
            "heard": [str(i) for i in range(50)],
        }
        (receiver_run,) = rt.runs(agent="receiver")
        (sender_run,) = rt.runs(agent="sender")
        mail = rt.store.mail_for(receiver_run.run_id)
        assert {m.state for m in mail} == {MailState.READ}
        # one step's fifty sends: one event on each side, naming every mail in order
        (sent,) = events.of(EventKind.MAIL_SENT, "sender")
        (delivered,) = events.of(EventKind.MAIL_DELIVERED, "receiver")
        ids = [m.mail_id for m in mail]
        assert sent.data == {
            "mail_id": ids[0],
            "mail_ids": ids,
            "count": 50,
            "recipient": receiver_run.run_id,
        }
        assert delivered.data == {
            "mail_id": ids[0],
            "mail_ids": ids,
            "count": 50,
            "sender": sender_run.run_id,
        }


def test_mail_to_a_finished_run_is_a_dead_letter_the_sender_hears_about(store: RunStore) -> None:
    async def quick(ctx: AgentContext) -> str:
        return "done"

    async def late(ctx: AgentContext) -> str:
        child: Outcome = await ctx.spawn("quick", "x")
        try:
            await ctx.send(child.run_id, "too late")
        except MailError as exc:
            return str(exc)
        return "delivered?"

    events = Events()
    with Runtime({"late": late, "quick": quick}, store=store) as rt:
        rt.subscribe(events)
        outcome = rt.run("late", "go", wait=WAIT)
        (child,) = rt.runs(agent="quick")
        assert outcome.result == (
            f"run {child.run_id} has already ended (completed); the mail was kept as a dead"
            " letter and will not be read"
        )
        (dead,) = rt.store.mail_for(child.run_id)
        assert dead.state is MailState.DEAD and dead.content == "too late"
        assert len(events.of(EventKind.DEAD_LETTER, "late")) == 1
        with pytest.raises(LookupError, match="has already ended"):
            rt.send(child.run_id, "from outside")


def test_mail_left_unread_when_a_run_ends_comes_back_to_its_sender(store: RunStore) -> None:
    release = Gate()

    def busy(ctx: AgentContext) -> str:
        assert release.wait(WAIT)  # a sync function never reads its mailbox
        return "busy done"

    async def writer(ctx: AgentContext) -> str:
        child = ctx.spawn("busy", "x", background=True)
        child_id: str = await child
        await ctx.send(child_id, "please read this")
        release.set()
        first: Mail | None = await ctx.receive(timeout=WAIT)
        second: Mail | None = await ctx.receive(timeout=WAIT)
        assert first is not None and second is not None
        return "\n".join(m.content for m in (first, second))

    with Runtime({"writer": writer, "busy": busy}, store=store) as rt:
        outcome = rt.run("writer", "go", wait=WAIT)
        assert outcome.status is RunStatus.COMPLETED, outcome
        assert outcome.result is not None
        first, second = outcome.result.split("\n")
        (busy_run,) = rt.runs(agent="busy")
        assert first.startswith(f'[background result] {{"run_id":"{busy_run.run_id}"')
        (mail,) = [m for m in rt.store.mail_for(busy_run.run_id) if m.content == "please read this"]
        assert second == (
            f"[dead letter] your mail {mail.mail_id} to busy ({busy_run.run_id}) was not read"
            " before it ended (completed)"
        )
        assert mail.state is MailState.DEAD


def test_a_run_cannot_mail_another_root_tree() -> None:
    release = Gate()

    def idle(ctx: AgentContext) -> str:
        assert release.wait(WAIT)
        return "idle"

    async def intruder(ctx: AgentContext) -> str:
        try:
            await ctx.send(ctx.task, "hello other tree")
        except MailError as exc:
            return str(exc)
        return "sent"

    with Runtime({"idle": idle, "intruder": intruder}) as rt:
        other = rt.spawn("idle", "x")
        outcome = rt.run("intruder", other.run_id, wait=WAIT)
        assert outcome.result == (
            f"run {other.run_id} belongs to another tree; a run can only write to runs of its"
            " own tree"
        )
        assert rt.store.mail_for(other.run_id) == []
        release.set()
        assert other.result(WAIT).status is RunStatus.COMPLETED


def test_mail_by_name_ambiguous_or_unknown_lists_the_candidates() -> None:
    async def worker(ctx: AgentContext) -> str:
        mail = await ctx.receive(timeout=WAIT)
        return mail.content if mail is not None else "no mail"

    async def boss(ctx: AgentContext) -> list[str]:
        a: str = await ctx.spawn("worker", "a", background=True)
        b: str = await ctx.spawn("worker", "b", background=True)
        errors: list[str] = []
        for to in ("worker", "nobody"):
            try:
                await ctx.send(to, "hi")
            except MailError as exc:
                errors.append(str(exc))
        await ctx.gather(ctx.send(a, "bye a"), ctx.send(b, "bye b"))
        return [*errors, a, b]

    with Runtime({"boss": boss, "worker": worker}) as rt:
        outcome = rt.run("boss", "go", wait=WAIT)
        ambiguous, unknown, a, b = msgspec.json.decode(outcome.result or "")
        assert ambiguous.startswith("'worker' is ambiguous: several live runs:")
        assert a in ambiguous and b in ambiguous
        assert unknown.startswith("no run named 'nobody' in this tree; candidates:")
        assert f"worker ({a})" in unknown and f"worker ({b})" in unknown
        assert f"boss ({outcome.run_id})" not in unknown  # not the sender itself


def test_llm_siblings_mail_each_other_with_a_reply() -> None:
    model = ShownModel(
        {
            "lead": [
                {
                    "tool_calls": [
                        # the answerer first: when the asker mails it by name, it exists
                        {"name": SPAWN, "input": {"agent": "answerer", "task": "answer"}},
                        {"name": SPAWN, "input": {"agent": "asker", "task": "ask"}},
                    ]
                },
                "{results_result}",
            ],
            "asker": [
                {
                    # send and wait in one turn: the reply can only answer the wait
                    "tool_calls": [
                        {"name": "send_message", "input": {"to": "answerer", "content": "2+2?"}},
                        {"name": "wait_for_message", "input": {"timeout": WAIT}},
                    ]
                },
                "asker heard {mail_content} (reply to {mail_reply_to})",
            ],
            "answerer": [
                {"tool_calls": [{"name": "wait_for_message", "input": {"timeout": WAIT}}]},
                {
                    "tool_calls": [
                        {
                            "name": "send_message",
                            "input": {"to": "{mail_from}", "content": "4", "reply_to": "{mail_id}"},
                        }
                    ]
                },
                "answered",
            ],
        }
    )
    events = Events()
    agents: list[AgentLike] = [spec("lead"), spec("asker"), spec("answerer")]
    with Runtime(agents, model=model) as rt:
        rt.subscribe(events)
        outcome = rt.run("lead", "job", wait=WAIT)
        assert outcome.status is RunStatus.COMPLETED
        asked = tool_results(requests_of(model, "asker")[1].messages[-1])[0]
        mail_id = msgspec.json.decode(asked.content)["mail_id"]
        assert outcome.result == f"answered\nasker heard 4 (reply to {mail_id})"
        assert len(events.of(EventKind.MAIL_SENT)) == 2
        assert len(events.of(EventKind.MAIL_DELIVERED)) == 2
        # one mail per step: the events keep their per-mail shape
        question = events.of(EventKind.MAIL_SENT, "asker")[0]
        assert question.data == {"mail_id": mail_id, "recipient": question.data["recipient"]}
        (answer,) = events.of(EventKind.MAIL_DELIVERED, "asker")
        assert set(answer.data) == {"mail_id", "sender"}


def test_mail_from_outside_wakes_an_agent_waiting_for_it() -> None:
    model = ScriptedModel(
        {
            "listener": [
                {"tool_calls": [{"name": "wait_for_message", "input": {"timeout": WAIT}}]},
                "heard: {mail_content} from {mail_from}",
            ]
        }
    )
    events = Events()
    with Runtime([spec("listener")], model=model) as rt:
        rt.subscribe(events)
        handle = rt.spawn("listener", "listen")
        events.wait_for(lambda items: any(e.kind is EventKind.WAITING for e in items))
        assert handle.status is RunStatus.WAITING
        handle.send("hello")
        outcome = handle.result(WAIT)
        assert outcome.result == "heard: hello from external"
        with pytest.raises(LookupError, match="no run with id 'r-nope'"):
            rt.send("r-nope", "x")


def test_mail_sent_to_a_queued_run_is_shown_when_it_starts(store: RunStore) -> None:
    """Its one step is its last: the step (the receipt of the mail it showed) and the end
    come in one ``Batch``, one decision (``alone.last_steps``): straight in memory, in the
    group with SQLite (the late reports' line); either way the mail is read."""
    release = Gate()

    def hold(ctx: AgentContext) -> str:
        assert release.wait(WAIT)
        return "held"

    model = ShownModel({"reader": ["read: {task}"]})
    agents: list[AgentLike] = [FunctionAgent.create("hold", hold), spec("reader")]
    with Runtime(agents, model=model, limits=Limits(max_concurrency=1), store=store) as rt:
        first = rt.spawn("hold", "x")
        queued = rt.spawn("reader", "the task")
        assert queued.status is RunStatus.QUEUED
        queued.send("early mail")
        release.set()
        assert first.result(WAIT).status is RunStatus.COMPLETED
        outcome = queued.result(WAIT)
        assert outcome.status is RunStatus.COMPLETED
        (request,) = requests_of(model, "reader")
        shown = request.messages[0].text
        assert "the task" in shown and "early mail" in shown
        (mail,) = rt.store.mail_for(queued.run_id)
        assert mail.state is MailState.READ


def test_mail_unread_by_a_stopped_run_comes_back_to_its_sender(store: RunStore) -> None:
    release = Gate()

    def busy(ctx: AgentContext) -> str:
        assert release.wait(WAIT)
        return "busy done"

    async def writer(ctx: AgentContext) -> str:
        child_id: str = await ctx.spawn("busy", "x", background=True)
        await ctx.send(child_id, "please read this")
        await ctx.stop(child_id)
        release.set()
        report: Mail | None = await ctx.receive(timeout=WAIT)
        assert report is not None and report.content.startswith("[background result]")
        notice: Mail | None = await ctx.receive(timeout=WAIT)
        return notice.content if notice is not None else "no notice"

    with Runtime({"writer": writer, "busy": busy}, store=store) as rt:
        outcome = rt.run("writer", "go", wait=WAIT)
        (busy_run,) = rt.runs(agent="busy")
        (mail,) = [m for m in rt.store.mail_for(busy_run.run_id) if m.sender != busy_run.run_id]
        assert outcome.result == (
            f"[dead letter] your mail {mail.mail_id} to busy ({busy_run.run_id}) was not read"
            " before it ended (cancelled)"
        )
        assert mail.state is MailState.DEAD


def test_mail_to_a_queued_run_that_never_starts_comes_back_to_its_sender(store: RunStore) -> None:
    release = Gate()

    def hold(ctx: AgentContext) -> str:
        assert release.wait(WAIT)
        return "held"

    async def writer(ctx: AgentContext) -> str:
        queued_id: str = await ctx.spawn("hold", "queued", background=True)
        await ctx.send(queued_id, "for when you start")
        await ctx.stop(queued_id)
        report: Mail | None = await ctx.receive(timeout=WAIT)
        assert report is not None and report.content.startswith("[background result]")
        notice: Mail | None = await ctx.receive(timeout=WAIT)
        return notice.content if notice is not None else "no notice"

    agents: list[AgentLike] = [
        FunctionAgent.create("hold", hold),
        FunctionAgent.create("writer", writer),
    ]
    # per_agent=1: the queued hold waits for the first one, which works (it never parks);
    # the writer's own slot, were it lent, would not let it start
    limits = Limits(max_concurrency=2, per_agent=1)
    with Runtime(agents, limits=limits, store=store) as rt:
        first = rt.spawn("hold", "holds the other slot")
        outcome = rt.run("writer", "go", wait=WAIT)
        release.set()
        assert first.result(WAIT).status is RunStatus.COMPLETED
        (queued,) = [r for r in rt.runs(agent="hold") if r.task == "queued"]
        assert queued.status is RunStatus.CANCELLED and queued.started_at is None
        (mail,) = [m for m in rt.store.mail_for(queued.run_id) if m.sender != queued.run_id]
        assert mail.state is MailState.DEAD
        assert outcome.result is not None
        assert outcome.result.startswith(f"[dead letter] your mail {mail.mail_id} to hold")


def test_mail_sent_to_a_queued_run_keeps_its_order(store: RunStore) -> None:
    release = Gate()

    def hold(ctx: AgentContext) -> str:
        assert release.wait(WAIT)
        return "held"

    async def reader(ctx: AgentContext) -> list[str]:
        return [m.content for m in ctx.mailbox()]

    agents: list[AgentLike] = [
        FunctionAgent.create("hold", hold),
        FunctionAgent.create("reader", reader),
    ]
    with Runtime(agents, limits=Limits(max_concurrency=1), store=store) as rt:
        first = rt.spawn("hold", "x")
        queued = rt.spawn("reader", "read")
        for i in range(50):
            queued.send(str(i))
        release.set()
        assert first.result(WAIT).status is RunStatus.COMPLETED
        outcome = queued.result(WAIT)
        assert msgspec.json.decode(outcome.result or "") == [str(i) for i in range(50)]


def test_a_mail_wrong_in_itself_is_a_value_error_and_loses_nothing_else() -> None:
    """``rt.send`` of a mail over the runtime's text cap, or holding a lone surrogate, raises
    ``ValueError`` naming what is wrong (it raised ``LookupError``, the promise for a run
    that ended or is unknown: a caller taking it so would believe its recipient gone). The
    recipient gets the next mail as usual."""

    async def reader(ctx: AgentContext) -> str:
        mail = await ctx.receive(timeout=WAIT)
        return "read: " + (mail.content if mail is not None else "nothing")

    with Runtime([FunctionAgent.create("reader", reader)], limits=Limits(max_text_chars=10)) as rt:
        handle = rt.spawn("reader", "go")
        with pytest.raises(ValueError, match="the mail is 11 characters, over the cap of 10"):
            rt.send(handle.run_id, "x" * 11)
        with pytest.raises(ValueError, match="lone surrogate"):
            handle.send("\ud800")
        rt.send(handle.run_id, "fits")
        assert handle.result(WAIT).result == "read: fits"
