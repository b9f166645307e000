"""OpenTelemetry traces of a Runtime: one span per run, one per model call and per tool call.

Opt-in, and an optional dependency (``pip install 'subagents[otel]'``): ``Runtime(
tracer_provider=...)`` with any provider, or the standard environment (``OTEL_TRACES_EXPORTER``
or ``OTEL_EXPORTER_OTLP[_TRACES]_ENDPOINT`` set, ``OTEL_SDK_DISABLED`` not ``true``: the global
SDK provider if the program set one, else one built here from the environment). Nothing here
is imported, and nothing is traced, otherwise.

The spans form the run tree:

- ``invoke_agent {agent}`` for each run, from its admission to its end; its parent is the
  span of the run that asked for it (a root run's span is a trace root). Transitions (queued,
  started, waiting, restarted), tool calls and mail (sent, delivered, dead letters) are span
  events on it; its status is ERROR for every end but ``completed``.
- ``chat {model}`` for each model call, and ``execute_tool {tool}`` for each tool call, under
  their run's span (from the LLM behaviour, ``behaviour.port.CallTracer``).

Attributes follow the OpenTelemetry GenAI semantic conventions: ``gen_ai.operation.name``,
``gen_ai.agent.name`` / ``.id``, ``gen_ai.request.model``, ``gen_ai.response.model``,
``gen_ai.usage.input_tokens`` / ``output_tokens``, ``gen_ai.tool.name`` / ``.call.id``,
``error.type``; what the conventions have no name for is under ``subagents.*`` (parent and
root run ids, depth, status, cost in USD).

Across processes: ids are derived from run ids (the trace id from the root run's id, a run
span's id from its run id), so a run resumed in another process after a crash gets the span
its children (already exported by the first process) name as their parent, and one span per
run is what a tracing backend shows. (A span never ended by a killed process was never
exported: the resumed process's span is the run's only one.) That needs the SDK's tracer; with
another provider the ids are the provider's and the tree holds within one process.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import msgspec

from subagents.logs import get_logger
from subagents.messages import Event, EventKind, ModelRequest, ModelResponse, RunRecord

if TYPE_CHECKING:
    from opentelemetry.trace import Span, SpanContext, Tracer

    from subagents.store.base import RunStore

log = get_logger("subagents.telemetry")

SCOPE = "subagents"


def _version() -> str | None:
    """The package's version, for the tracer's instrumentation scope, read from its installed
    metadata (``subagents.__version__`` is the same: importing the package's public face
    from here would make an import cycle, tests/test_import_graph.py); None if the package
    runs from a source tree without being installed (the scope's version is optional)."""
    try:
        return importlib.metadata.version("subagents")
    except importlib.metadata.PackageNotFoundError:
        return None


MAX_ATTRIBUTE = 1000
"""Text attributes (a task, an error) are cut to this many characters."""

_TERMINAL = {
    EventKind.COMPLETED,
    EventKind.FAILED,
    EventKind.CANCELLED,
    EventKind.TIMED_OUT,
    EventKind.BUDGET_EXCEEDED,
}


def trace_id_for(root_run_id: str) -> int:
    """The trace id of a run tree: 128 bits derived from its root run's id."""
    return int.from_bytes(hashlib.sha256(f"trace:{root_run_id}".encode()).digest()[:16], "big") or 1


def span_id_for(run_id: str) -> int:
    """The span id of a run's span: 64 bits derived from its run id."""
    return int.from_bytes(hashlib.sha256(f"span:{run_id}".encode()).digest()[:8], "big") or 1


def env_opted_in() -> bool:
    """Whether the standard OTEL_* environment asks for traces."""
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporters = os.environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporters == "none":
        return False
    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT"
    )
    return bool(exporters or endpoint)


def provider_from_env() -> tuple[Any, bool] | None:
    """``(provider, owned)`` when the environment opts in, else None. ``owned``: built here,
    so the runtime shuts it down (flushing its spans) when it closes."""
    if not env_opted_in():
        return None
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import (
            BatchSpanProcessor,
            ConsoleSpanExporter,
            SimpleSpanProcessor,
        )
    except ImportError:
        log.warning(
            "OTEL_* asks for traces but OpenTelemetry is not installed:"
            " pip install 'subagents[otel]'"
        )
        return None
    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider):  # the program (or opentelemetry-instrument) set one
        return current, False
    provider = TracerProvider(resource=Resource.create())
    names = [n.strip() for n in os.environ.get("OTEL_TRACES_EXPORTER", "otlp").split(",")]
    for name in filter(None, names):
        if name == "console":
            provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
        elif name == "otlp":
            exporter = _otlp_exporter()
            if exporter is not None:
                provider.add_span_processor(BatchSpanProcessor(exporter))
        else:
            log.warning("unknown OTEL_TRACES_EXPORTER ignored", exporter=name)
    return provider, True


def _otlp_exporter() -> Any:
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # type: ignore[import-not-found,unused-ignore]
            OTLPSpanExporter,
        )
    except ImportError:
        try:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (  # type: ignore[import-not-found,unused-ignore]
                OTLPSpanExporter,
            )
        except ImportError:
            log.warning(
                "OTEL_TRACES_EXPORTER=otlp needs an OTLP exporter:"
                " pip install opentelemetry-exporter-otlp-proto-http"
            )
            return None
    return OTLPSpanExporter()


class _PresetIds:
    """The SDK tracer's id generator, answering with preset ids when a run span is started
    (on the thread that set them), and with its own otherwise."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self._local = threading.local()

    def preset(self, trace_id: int | None, span_id: int) -> None:
        self._local.trace_id, self._local.span_id = trace_id, span_id

    def generate_trace_id(self) -> int:
        preset = getattr(self._local, "trace_id", None)
        if preset is not None:
            self._local.trace_id = None
            return int(preset)
        return int(self.inner.generate_trace_id())

    def generate_span_id(self) -> int:
        preset = getattr(self._local, "span_id", None)
        if preset is not None:
            self._local.span_id = None
            return int(preset)
        return int(self.inner.generate_span_id())

    def is_trace_id_random(self) -> bool:
        return False


def _nanos(ts: float) -> int:
    return int(ts * 1e9)


def _text(value: object) -> str:
    text = str(value)
    return text if len(text) <= MAX_ATTRIBUTE else text[: MAX_ATTRIBUTE - 1] + "…"


def _attributes(data: Mapping[str, Any], prefix: str = "subagents.") -> dict[str, Any]:
    """Event data as span attributes: plain values only (texts cut)."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, bool | int | float):
            out[prefix + key] = value
        elif isinstance(value, str):
            out[prefix + key] = _text(value)
        elif isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
            out[prefix + key] = [str(v) for v in value]
    return out


def model_call_span(record: RunRecord, request: ModelRequest) -> tuple[str, dict[str, Any]]:
    """A model call's span name and attributes, as it starts."""
    return f"chat {request.model}", {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "anthropic",
        "gen_ai.request.model": request.model,
        "gen_ai.request.max_tokens": request.max_tokens,
        "gen_ai.agent.name": record.agent,
        "gen_ai.agent.id": record.run_id,
    }


def tool_call_span(record: RunRecord, call_id: str, name: str) -> tuple[str, dict[str, Any]]:
    """A tool call's span name and attributes, as it starts."""
    return f"execute_tool {name}", {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.call.id": call_id,
        "gen_ai.tool.type": "function",
        "gen_ai.agent.id": record.run_id,
    }


def call_end_attributes(error: str | None, response: ModelResponse | None) -> dict[str, Any]:
    """What a call's span gets when it ends: the response's model and usage, the error's
    type (its status, ERROR, is set from ``error`` itself)."""
    attributes: dict[str, Any] = {}
    if response is not None:
        usage = response.usage
        attributes["gen_ai.response.model"] = response.model or ""
        attributes["gen_ai.usage.input_tokens"] = usage.total_input_tokens
        attributes["gen_ai.usage.output_tokens"] = usage.output_tokens
        attributes["gen_ai.response.finish_reasons"] = [response.stop_reason]
        attributes["subagents.cost_usd"] = usage.cost_usd
    if error is not None:
        attributes["error.type"] = _text(error.split(":", 1)[0])
    return attributes


class FinishedCall(msgspec.Struct, frozen=True, tag=True):
    """A model or tool call's span made in another process (a cluster's node), as data: the
    driver's ``Telemetry.record_call`` makes the span, under its run's, with these times."""

    name: str
    client: bool
    """A model call (``SpanKind.CLIENT``); else a tool call (``INTERNAL``)."""
    run_id: str
    root_run_id: str
    attributes: dict[str, Any]
    start_ns: int
    end_ns: int
    error: str | None = None


class _CallSpan:
    """A model or tool call's span, ended once."""

    def __init__(self, span: Span) -> None:
        self.span = span

    def end(self, *, error: str | None = None, response: ModelResponse | None = None) -> None:
        from opentelemetry.trace import Status, StatusCode

        self.span.set_attributes(call_end_attributes(error, response))
        if error is not None:
            self.span.set_status(Status(StatusCode.ERROR, _text(error)))
        self.span.end()


class Telemetry:
    """Turns a Runtime's events into run spans, and gives the LLM behaviour its call spans.

    Run spans are started and ended on the supervisor's thread (events); call spans on the
    agents' threads, under the run span's context (the live span's own, or the one derived
    from the run ids when the span is not up yet: a run resumed by a restore starts stepping
    before its event is published)."""

    def __init__(self, provider: Any, store: RunStore, *, owned: bool = False) -> None:
        self.provider = provider
        self.owned = owned
        self.store = store
        self.tracer: Tracer = provider.get_tracer(SCOPE, _version())
        self._ids: _PresetIds | None = None
        inner = getattr(self.tracer, "id_generator", None)
        if inner is not None:  # the SDK's tracer: run spans get ids derived from run ids
            self._ids = _PresetIds(inner)
            self.tracer.id_generator = self._ids  # type: ignore[attr-defined,unused-ignore]
        self._spans: dict[str, Span] = {}
        self._contexts: dict[str, SpanContext] = {}
        self._roots: dict[str, str] = {}
        self._lock = threading.Lock()

    # ---- run spans (supervisor thread) ------------------------------------------------------

    def on_event(self, event: Event) -> None:
        span = self._spans.get(event.run_id)
        if span is None:  # admitted now, or taken up after a restart or in a new process
            if event.run_id in self._contexts:  # its span ended here: an event after its end
                return  # (``mail_refused``: mail posted to it as it ended) opens none again
            span = self._start_run_span(event)
        kind = event.kind
        if kind is EventKind.SPAWNED:
            return
        if kind in _TERMINAL:
            self._end_run_span(span, event)
            return
        if kind is EventKind.STEP:
            return  # the model call's own span says it
        span.add_event(str(kind), _attributes(event.data), timestamp=_nanos(event.ts))

    def _start_run_span(self, event: Event) -> Span:
        from opentelemetry import trace
        from opentelemetry.trace import SpanKind

        parent = None
        if event.parent_run_id is not None:
            parent = trace.set_span_in_context(
                trace.NonRecordingSpan(self.context_of(event.parent_run_id, event.root_run_id))
            )
        if self._ids is not None:
            root = event.parent_run_id is None
            trace_id = trace_id_for(event.root_run_id) if root else None
            self._ids.preset(trace_id, span_id_for(event.run_id))
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": event.agent,
            "gen_ai.agent.id": event.run_id,
            "subagents.run.root_id": event.root_run_id,
            "subagents.run.depth": event.depth,
        }
        if event.parent_run_id is not None:
            attributes["subagents.run.parent_id"] = event.parent_run_id
        if "task" in event.data:
            attributes["subagents.run.task"] = _text(event.data["task"])
        if event.kind is not EventKind.SPAWNED:
            attributes["subagents.run.resumed"] = True  # begun in another process (or earlier)
        span = self.tracer.start_span(
            f"invoke_agent {event.agent}",
            context=parent,
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            start_time=_nanos(event.ts),
        )
        with self._lock:
            self._spans[event.run_id] = span
            self._contexts[event.run_id] = span.get_span_context()
            self._roots[event.run_id] = event.root_run_id
        return span

    def _end_run_span(self, span: Span, event: Event) -> None:
        from opentelemetry.trace import Status, StatusCode

        record = self.store.get_run(event.run_id)
        span.set_attribute("subagents.run.status", str(event.kind))
        if record is not None:
            usage = record.usage
            span.set_attribute("gen_ai.request.model", record.model or "")
            span.set_attribute("gen_ai.usage.input_tokens", usage.total_input_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
            span.set_attribute("subagents.cost_usd", usage.cost_usd)
            span.set_attribute("subagents.run.steps", record.steps)
        if event.kind is not EventKind.COMPLETED:
            error = str(event.data.get("error") or event.kind)
            span.set_attribute("error.type", str(event.data.get("error_kind") or event.kind))
            span.set_status(Status(StatusCode.ERROR, _text(error)))
        span.end(end_time=_nanos(event.ts))
        with self._lock:
            self._spans.pop(event.run_id, None)

    def context_of(self, run_id: str, root_run_id: str | None = None) -> SpanContext:
        """The span context of ``run_id``'s span: the live span's, else derived from the ids."""
        from opentelemetry.trace import SpanContext, TraceFlags

        with self._lock:
            known = self._contexts.get(run_id)
            root = root_run_id or self._roots.get(run_id)
        if known is not None:
            return known
        if root is None:
            record = self.store.get_run(run_id)
            root = record.root_run_id if record is not None else run_id
        return SpanContext(
            trace_id_for(root),
            span_id_for(run_id),
            is_remote=False,
            trace_flags=TraceFlags(TraceFlags.SAMPLED),
        )

    # ---- call spans (agent threads): behaviour.port.CallTracer ------------------------------

    def _under(self, record: RunRecord) -> Any:
        from opentelemetry import trace

        context = self.context_of(record.run_id, record.root_run_id)
        return trace.set_span_in_context(trace.NonRecordingSpan(context))

    def model_call(self, record: RunRecord, request: ModelRequest) -> _CallSpan:
        from opentelemetry.trace import SpanKind

        name, attributes = model_call_span(record, request)
        span = self.tracer.start_span(
            name,
            context=self._under(record),
            kind=SpanKind.CLIENT,
            attributes=attributes,
            start_time=time.time_ns(),
        )
        return _CallSpan(span)

    def tool_call(
        self, record: RunRecord, call_id: str, name: str, arguments: Mapping[str, Any]
    ) -> _CallSpan:
        span_name, attributes = tool_call_span(record, call_id, name)
        span = self.tracer.start_span(
            span_name,
            context=self._under(record),
            attributes=attributes,
            start_time=time.time_ns(),
        )
        return _CallSpan(span)

    def record_call(self, call: FinishedCall) -> None:
        """A call span made on a cluster's node (``FinishedCall``): made here, under its
        run's span, with the node's times."""
        from opentelemetry import trace
        from opentelemetry.trace import SpanKind, Status, StatusCode

        parent = trace.set_span_in_context(
            trace.NonRecordingSpan(self.context_of(call.run_id, call.root_run_id))
        )
        span = self.tracer.start_span(
            call.name,
            context=parent,
            kind=SpanKind.CLIENT if call.client else SpanKind.INTERNAL,
            attributes=call.attributes,
            start_time=call.start_ns,
        )
        if call.error is not None:
            span.set_status(Status(StatusCode.ERROR, _text(call.error)))
        span.end(end_time=call.end_ns)

    # ---- lifecycle --------------------------------------------------------------------------

    def close(self) -> None:
        """End what is still open (a run cut off by a store failure) and flush."""
        with self._lock:
            left, self._spans = list(self._spans.values()), {}
        for span in left:
            span.end()
        if self.owned:
            self.provider.shutdown()
        else:
            flush = getattr(self.provider, "force_flush", None)
            if callable(flush):
                flush()
