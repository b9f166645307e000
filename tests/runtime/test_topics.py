"""Topics with real actors: function agents and models subscribe (``ctx.subscribe``, the
``subscribe`` tool); mail to ``topic:NAME`` reaches every subscriber of the tree, each in
the order its sender sent."""

from __future__ import annotations

import threading

import pytest

from subagents.behaviour.function import AgentContext
from subagents.messages import Mail, RunStatus, ToolResultBlock
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime
from subagents.store.base import RunStore

from .conftest import WAIT, Events, spec

pytestmark = pytest.mark.usefixtures("no_new_threads")


async def listener(ctx: AgentContext) -> list[str]:
    """Subscribes to the topic its task names, tells its parent it is ready, reads three."""
    ctx.subscribe(ctx.task)
    await ctx.send(ctx.parent_run_id or "", "ready")
    heard: list[str] = []
    while len(heard) < 3:
        mail: Mail | None = await ctx.receive(timeout=WAIT)
        assert mail is not None, "no mail"
        assert mail.topic == ctx.task
        heard.append(mail.content)
    return heard


async def hub(ctx: AgentContext) -> dict[str, object]:
    calls = [ctx.spawn("listener", "news") for _ in range(2)]
    calls.append(ctx.spawn("listener", "other"))  # subscribed to another topic
    for _ in range(3):
        ready = await ctx.receive(timeout=WAIT)
        assert ready is not None and ready.content == "ready"
    first = await ctx.send("topic:news", "one")
    for text in ("two", "three"):
        await ctx.send("topic:news", text)
    for text in ("x", "y", "z"):
        await ctx.send("topic:other", text)
    nobody = await ctx.send("topic:nobody-listens", "lost")
    outcomes = await ctx.gather(*calls)
    return {"first": first, "nobody": nobody, "heard": [o.value for o in outcomes]}


def test_function_agents_publish_to_every_subscriber_in_order() -> None:
    with Runtime([hub, listener]) as rt:
        outcome = rt.run("hub", "go", wait=WAIT)
        assert outcome.status is RunStatus.COMPLETED, outcome.error
        value = outcome.value
        assert value["heard"] == [["one", "two", "three"]] * 2 + [["x", "y", "z"]]
        assert isinstance(value["first"], str) and value["nobody"] is None
        listeners = rt.runs(agent="listener")
        assert all(r.status is RunStatus.COMPLETED for r in listeners)


def test_a_bad_topic_name_raises_at_once() -> None:
    async def bad(ctx: AgentContext) -> str:
        try:
            ctx.subscribe("has space")
        except ValueError as exc:
            return str(exc)
        return "accepted"

    with Runtime([bad]) as rt:
        outcome = rt.run("bad", "go", wait=WAIT)
        assert (outcome.result or "").startswith("bad topic name 'has space'")


def test_a_model_subscribes_with_its_tool_and_reads_the_topics_mail() -> None:
    """The reader mails the lead and waits for mail in one turn: its ``wait_for_message``
    waits before the lead can hear "on" (the turn's mail goes as the turn's handling ends),
    so the topic's mail answers that call whatever the threads' order. (With the wait in the
    next turn, the mail could reach the reader before that turn's model call: it is then shown
    in its message, read, and the script's wait never hears of it: the next test.)"""

    async def lead(ctx: AgentContext) -> str:
        reader = await ctx.spawn("reader", "follow the reviews", background=True)
        ready = await ctx.receive(timeout=WAIT)
        assert ready is not None and ready.sender == reader
        ack = await ctx.send("topic:reviews", "LGTM with nits")
        assert ack is not None
        done = await ctx.receive(timeout=WAIT)
        return done.content if done is not None else "nothing"

    model = ScriptedModel(
        {
            "reader": [
                {"tool_calls": [{"name": "subscribe", "input": {"topic": "reviews"}}]},
                {
                    "tool_calls": [
                        {"name": "send_message", "input": {"to": "lead", "content": "on"}},
                        {"name": "wait_for_message", "input": {"timeout": WAIT}},
                    ]
                },
                {"text": "reader heard: {mail_content}"},
            ]
        }
    )
    events = Events()
    reader = spec("reader", tools=("subscribe", "send_message", "wait_for_message"))
    with Runtime([lead, reader], model=model) as rt:
        rt.subscribe(events)
        outcome = rt.run("lead", "go", wait=WAIT)
        assert outcome.status is RunStatus.COMPLETED, outcome.error
        assert '"result":"reader heard: LGTM with nits"' in (outcome.result or "")
        first = model.requests[1].messages[-1].content
        assert "subscribed to topic:reviews" in str(first)
        last = model.requests[-1].messages[-1].content
        answer = [b for b in last if isinstance(b, ToolResultBlock)][-1]
        assert 'topic="reviews"' in answer.content  # which topic the mail came by
        assert "LGTM with nits" in answer.content  # the wait's answer, not the message's


def test_topic_mail_that_comes_before_the_next_step_is_shown_in_it_not_to_its_wait() -> None:
    """What made the test above hang in about half the runs under load (with its wait in the
    turn after the one that mails "on"): the topic's mail reached the reader between its two
    turns, so it was shown in the next model call's message (read there, as any mail that
    comes between turns), and that turn's ``wait_for_message`` waited for mail that had
    been read already. Forced here: the reader's turn holds (a tool) until the lead's send to
    the topic is acknowledged, i.e. the mail is in the reader's mailbox, ahead of its next
    step. The mail is in the next message, and the wait hears nothing."""
    sent = threading.Event()

    async def lead(ctx: AgentContext) -> str:
        await ctx.spawn("reader", "follow the reviews", background=True)
        ready = await ctx.receive(timeout=WAIT)
        assert ready is not None
        ack = await ctx.send("topic:reviews", "LGTM with nits")
        assert ack is not None
        sent.set()
        done = await ctx.receive(timeout=WAIT)
        return done.content if done is not None else "nothing"

    def hold() -> str:
        """Wait until the lead's topic mail has been sent."""
        return "sent" if sent.wait(WAIT) else "not sent"

    model = ScriptedModel(
        {
            "reader": [
                {"tool_calls": [{"name": "subscribe", "input": {"topic": "reviews"}}]},
                {
                    "tool_calls": [
                        {"name": "send_message", "input": {"to": "lead", "content": "on"}},
                        {"name": "hold", "input": {}},
                    ]
                },
                {"tool_calls": [{"name": "wait_for_message", "input": {"timeout": 0.01}}]},
                {"text": "wait: {results}"},
            ]
        }
    )
    tools = ("subscribe", "send_message", "wait_for_message", "hold")
    with Runtime([lead, spec("reader", tools=tools)], model=model, tools=[hold]) as rt:
        outcome = rt.run("lead", "go", wait=WAIT)
        assert outcome.status is RunStatus.COMPLETED, outcome.error
        assert "wait: no mail arrived before the timeout" in (outcome.result or "")
        shown = model.requests[2].messages[-1].content  # the message of the turn that waits
        assert [b.content for b in shown if isinstance(b, ToolResultBlock)][-1] == "sent"
        assert 'topic="reviews">LGTM with nits</mail>' in str(shown)


@pytest.mark.parametrize("end", ["stopped", "runtime closed"])
def test_a_runs_subscriptions_end_with_it_in_the_store_however_it_ends(
    end: str, store: RunStore
) -> None:
    """As a stop does, a runtime's close (every run ended at once: ``closing.close_all``)
    ends its runs' subscriptions in the store: ``subagents info`` of a closed run shows no
    topic, and what the store keeps is only what live runs hear."""
    subscribed = threading.Event()

    async def watcher(ctx: AgentContext) -> str:
        ctx.subscribe("alerts")
        # a mail the supervisor answers after the subscription (one sender's are in order)
        await ctx.send("topic:alerts", "anyone?")
        subscribed.set()
        await ctx.receive(timeout=WAIT)
        return "not stopped"

    with Runtime([watcher], store=store) as rt:
        run_id = rt.spawn("watcher", "watch").run_id
        assert subscribed.wait(WAIT)
        assert [(s.run_id, s.topic) for s in store.subscriptions()] == [(run_id, "alerts")]
        if end == "stopped":
            assert rt.stop(run_id) == (run_id,)
    record = store.get_run(run_id)
    assert record is not None and record.status is RunStatus.CANCELLED
    assert store.subscriptions() == []
