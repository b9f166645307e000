"""OpenTelemetry: the spans of a run tree, read back from the SDK's in-memory exporter, and the
same tree across a crash (spans exported by a killed process, the rest by the one that resumed
its runs)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from polling import wait_until
from subagents import AgentSpec, Runtime, ScriptedModel, SQLiteStore
from subagents.messages import EventKind, RunStatus
from subagents.telemetry import env_opted_in, span_id_for, trace_id_for

LEAD = AgentSpec(name="lead", description="fans out", tools=("spawn_subagent",))
WORKER = AgentSpec(name="worker", description="works", tools=("send_message",))
FAILER = AgentSpec(name="failer", description="fails")
MODEL = ScriptedModel(
    {
        "lead": [
            {
                "tool_calls": [
                    {"name": "spawn_subagent", "input": {"agent": "worker", "task": "a"}},
                    {"name": "spawn_subagent", "input": {"agent": "failer", "task": "b"}},
                ],
                "usage": {"input_tokens": 11, "output_tokens": 3},
            },
            {"text": "done: {result0_result} / {result1_status}"},
        ],
        "worker": [
            {
                "tool_calls": [{"name": "send_message", "input": {"to": "lead", "content": "hi"}}],
                "usage": {"input_tokens": 7, "output_tokens": 2},
            },
            {"text": "worked on {task}"},
        ],
        "failer": [{"error": {"kind": "boom", "message": "scripted failure"}}],
    }
)


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


def _provider(exporter: InMemorySpanExporter) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def _by_name(spans: tuple[ReadableSpan, ...], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def test_the_spans_form_the_run_tree(exporter: InMemorySpanExporter) -> None:
    with Runtime([LEAD, WORKER, FAILER], model=MODEL, tracer_provider=_provider(exporter)) as rt:
        outcome = rt.run("lead", "go")
        runs = {r.agent: r for r in rt.runs()}
    assert outcome.result == "done: worked on a / failed"
    spans = exporter.get_finished_spans()
    [lead] = _by_name(spans, "invoke_agent lead")
    [worker] = _by_name(spans, "invoke_agent worker")
    [failer] = _by_name(spans, "invoke_agent failer")
    lead_id = runs["lead"].run_id
    # one trace per tree, ids derived from the run ids; children under their requester's span
    assert lead.context.trace_id == trace_id_for(lead_id)
    assert lead.context.span_id == span_id_for(lead_id) and lead.parent is None
    for child in (worker, failer):
        assert child.parent is not None and child.parent.span_id == lead.context.span_id
        assert child.context.trace_id == lead.context.trace_id
    assert worker.context.span_id == span_id_for(runs["worker"].run_id)
    # gen_ai attributes
    assert lead.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert lead.attributes["gen_ai.agent.name"] == "lead"
    assert lead.attributes["gen_ai.agent.id"] == lead_id
    assert lead.attributes["gen_ai.usage.input_tokens"] == runs["lead"].usage.total_input_tokens
    assert worker.attributes["subagents.run.parent_id"] == lead_id
    assert lead.status.status_code is not StatusCode.ERROR
    assert failer.status.status_code is StatusCode.ERROR
    assert failer.attributes["error.type"] == "model_boom"
    # a span per model call and per tool call, under their run's span
    chats = [s for s in spans if s.name.startswith("chat ")]
    assert len(chats) == 2 + 2 + 1
    by_run = {lead.context.span_id: "lead", worker.context.span_id: "worker"}
    by_run[failer.context.span_id] = "failer"
    assert sorted(by_run[c.parent.span_id] for c in chats if c.parent) == [
        "failer", "lead", "lead", "worker", "worker",
    ]  # fmt: skip
    first_lead_chat = min(
        (c for c in chats if c.parent and c.parent.span_id == lead.context.span_id),
        key=lambda c: c.start_time or 0,
    )
    assert first_lead_chat.attributes["gen_ai.operation.name"] == "chat"
    assert first_lead_chat.attributes["gen_ai.usage.input_tokens"] == 11
    assert first_lead_chat.attributes["gen_ai.usage.output_tokens"] == 3
    tools = [s for s in spans if s.name.startswith("execute_tool ")]
    assert sorted(s.name for s in tools) == [
        "execute_tool send_message", "execute_tool spawn_subagent", "execute_tool spawn_subagent",
    ]  # fmt: skip
    for tool in tools:
        assert tool.attributes["gen_ai.tool.call.id"]
        owner = worker if tool.name == "execute_tool send_message" else lead
        assert tool.parent is not None and tool.parent.span_id == owner.context.span_id
    # mail as span events, on the sender's span and the recipient's
    assert any(e.name == "mail_sent" for e in worker.events)
    assert any(e.name == "mail_delivered" for e in lead.events)
    assert {"started", "waiting"} <= {e.name for e in lead.events}


def test_a_stopped_runs_unanswered_tool_calls_are_exported(
    exporter: InMemorySpanExporter,
) -> None:
    """The lead is stopped while its spawn call waits for a child: the call's span ends (as
    cancelled) with the run, instead of never being exported."""
    model = ScriptedModel(
        {
            "lead": [
                {
                    "tool_calls": [
                        {"name": "spawn_subagent", "input": {"agent": "sleeper", "task": "z"}}
                    ]
                },
                "never",
            ],
            "sleeper": [{"text": "late", "delay": 3600}],
        }
    )
    sleeper = AgentSpec(name="sleeper", description="sleeps")
    with Runtime([LEAD, sleeper], model=model, tracer_provider=_provider(exporter)) as rt:
        child_started = threading.Event()
        rt.subscribe(
            lambda e: (
                child_started.set()
                if e.kind is EventKind.STARTED and e.agent == "sleeper"
                else None
            )
        )
        handle = rt.spawn("lead", "go")
        assert child_started.wait(60), "the child did not start"
        handle.stop()
        assert handle.result(60).status is RunStatus.CANCELLED
    [call] = _by_name(exporter.get_finished_spans(), "execute_tool spawn_subagent")
    assert call.status.status_code is StatusCode.ERROR
    assert call.attributes["error.type"] == "cancelled"
    [lead] = _by_name(exporter.get_finished_spans(), "invoke_agent lead")
    assert call.parent is not None and call.parent.span_id == lead.context.span_id


def test_a_tool_call_answered_with_an_error_has_error_type_tool_error(
    exporter: InMemorySpanExporter,
) -> None:
    """The error class is the attribute (low cardinality); the result's text is the status."""
    model = ScriptedModel(
        {
            "worker": [
                {
                    "tool_calls": [
                        {"name": "send_message", "input": {"to": "ghost", "content": "?"}}
                    ]
                },
                "gave up",
            ]
        }
    )
    with Runtime([WORKER], model=model, tracer_provider=_provider(exporter)) as rt:
        assert rt.run("worker", "go").result == "gave up"
    [call] = _by_name(exporter.get_finished_spans(), "execute_tool send_message")
    assert call.status.status_code is StatusCode.ERROR
    assert call.attributes["error.type"] == "tool_error"
    assert "ghost" in (call.status.description or "")


def test_nothing_is_traced_without_a_provider_or_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in list(os.environ):
        if name.startswith("OTEL_"):
            monkeypatch.delenv(name)
    assert not env_opted_in()
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")
    assert env_opted_in()
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert not env_opted_in()
    monkeypatch.delenv("OTEL_SDK_DISABLED")
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "none")
    assert not env_opted_in()
    monkeypatch.delenv("OTEL_TRACES_EXPORTER")
    with Runtime([FAILER], model=MODEL) as rt:
        assert rt.env.tracer is None


JOB = textwrap.dedent(
    """
    import sys
    from subagents import AgentSpec, Runtime, ScriptedModel, SQLiteStore
    model = ScriptedModel({
        "lead": [
            {"tool_calls": [
                {"name": "spawn_subagent", "input": {"agent": "quick", "task": "q"}},
                {"name": "spawn_subagent", "input": {"agent": "waiter", "task": "w"}},
            ]},
            {"text": "lead: {result0_result} + {result1_result}"},
        ],
        "quick": [{"text": "quick done"}],
        "waiter": [
            {"tool_calls": [{"name": "wait_for_message", "input": {"timeout": 60}}]},
            {"text": "waiter heard {mail_content}"},
        ],
    })
    AGENTS = [
        AgentSpec(name="lead", description="d", tools=("spawn_subagent",)),
        AgentSpec(name="quick", description="d"),
        AgentSpec(name="waiter", description="d", tools=("wait_for_message",)),
    ]
    """
)


def _spans_in(text: str) -> list[dict[str, Any]]:
    """The JSON objects the console exporter printed, one after another."""
    decoder, spans, at = json.JSONDecoder(), [], 0
    while True:
        start = text.find("{", at)
        if start < 0:
            return spans
        span, at = decoder.raw_decode(text, start)
        spans.append(span)


def test_a_run_resumed_in_another_process_keeps_its_span_and_its_childrens_parent(
    tmp_path: Path, exporter: InMemorySpanExporter
) -> None:
    db, there = tmp_path / "runs.db", tmp_path / "there"
    script = tmp_path / "job.py"
    # the job says it got there once it has seen both events, after the exporter printed
    # quick's span (subscribers are called in turn, telemetry's first): the store shows quick
    # completed as soon as that is committed, before its span is printed
    script.write_text(
        JOB
        + textwrap.dedent(
            f"""
            import pathlib
            wanted = {{("completed", "quick"), ("waiting", "waiter")}}
            def note(event):
                wanted.discard((str(event.kind), event.agent))
                if not wanted:
                    pathlib.Path({str(there)!r}).touch()
            with Runtime(AGENTS, model=model, store=SQLiteStore({str(db)!r})) as rt:
                rt.subscribe(note)
                rt.spawn("lead", "the job")
                rt.runs()  # admitted
                import time; time.sleep(600)
            """
        )
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(
        OTEL_TRACES_EXPORTER="console", OTEL_SERVICE_NAME="first", SUBAGENTS_LOG_LEVEL="error"
    )
    proc = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )

    def got_there() -> bool:
        assert proc.poll() is None, proc.communicate()[1].decode()[-2000:]
        return there.exists()

    try:
        wait_until(got_there, "the job's quick run completed and its waiter waiting")
    finally:
        proc.send_signal(signal.SIGKILL)
        out, _err = proc.communicate(timeout=120)
    store = SQLiteStore(db)
    runs = {r.agent: r for r in store.list_runs()}
    assert runs["quick"].status is RunStatus.COMPLETED
    assert runs["waiter"].status is RunStatus.WAITING
    first = _spans_in(out.decode())
    [quick] = [s for s in first if s["name"] == "invoke_agent quick"]
    lead_id, waiter_id = runs["lead"].run_id, runs["waiter"].run_id
    assert quick["context"]["trace_id"] == f"0x{trace_id_for(lead_id):032x}"
    assert quick["parent_id"] == f"0x{span_id_for(lead_id):016x}"  # a span not exported yet
    assert not [s for s in first if s["name"] == "invoke_agent lead"]  # killed before its end

    namespace: dict[str, Any] = {}
    exec(compile(JOB, "job", "exec"), namespace)  # the same agents and script
    with Runtime(
        namespace["AGENTS"], model=namespace["model"], store=store,
        tracer_provider=_provider(exporter),
    ) as rt:  # fmt: skip
        assert set(rt.restore_report.resumed) >= {lead_id, waiter_id}
        rt.send(waiter_id, "go on")
        outcome = rt.attach(lead_id).result(timeout=120)
    store.close()
    assert outcome.result == "lead: quick done + waiter heard go on"
    spans = exporter.get_finished_spans()
    [lead] = _by_name(spans, "invoke_agent lead")
    [waiter] = _by_name(spans, "invoke_agent waiter")
    # the resumed lead's span is the one the first process's quick span named as its parent
    assert lead.context.span_id == span_id_for(lead_id)
    assert lead.context.trace_id == trace_id_for(lead_id)
    assert lead.attributes["subagents.run.resumed"] is True
    assert waiter.parent is not None and waiter.parent.span_id == lead.context.span_id
    assert waiter.context.span_id == span_id_for(waiter_id)


def test_a_mail_refused_after_its_run_ended_opens_no_second_span_of_it(
    exporter: InMemorySpanExporter,
) -> None:
    """Mail posted from another process (``subagents send``) to the lead, taken after the
    lead ended (its tree still held: a detached child runs on), is a dead letter and a
    ``mail_refused`` event of the ended lead. That event, after the lead's span ended,
    started a new span of the lead (taken for a run resumed here), which the close then
    ended: the trace showed the lead twice, the second with no status."""
    from subagents.behaviour.function import AgentContext

    gate, refused, kept_done = threading.Event(), threading.Event(), threading.Event()

    async def lead(ctx: AgentContext) -> str:
        kept: str = await ctx.spawn("keeper", "k", detach=True)
        return kept

    def keeper(ctx: AgentContext) -> str:
        assert gate.wait(60), "never let go"
        return "kept"

    def watch(event: Any) -> None:
        if event.kind is EventKind.MAIL_REFUSED:
            refused.set()
        elif event.kind is EventKind.COMPLETED and event.agent == "keeper":
            kept_done.set()

    try:
        with Runtime([lead, keeper], tracer_provider=_provider(exporter)) as rt:
            rt.subscribe(watch)
            outcome = rt.run("lead", "go", wait=60)
            assert outcome.status is RunStatus.COMPLETED, outcome.error
            rt.store.post_command("send", outcome.run_id, "too late")
            assert refused.wait(60), "no mail_refused event"
            gate.set()
            assert kept_done.wait(60), "the keeper never ended"
    finally:
        gate.set()
    leads = _by_name(exporter.get_finished_spans(), "invoke_agent lead")
    assert len(leads) == 1, [dict(s.attributes or {}) for s in leads]
    assert leads[0].attributes["subagents.run.status"] == "completed"
