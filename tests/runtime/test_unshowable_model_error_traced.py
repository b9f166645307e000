"""With telemetry on, a model error whose ``str`` raises is still the one named, in the run's
error and in the model call's span. Before, the trace's message (``offer.complete``) was made
with ``str(exc)`` in the ``except``: the ``AttributeError`` it raised replaced the model's
error, the run failed naming the ``AttributeError`` and the call's span never ended."""

from __future__ import annotations

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from subagents import AgentSpec, Runtime
from subagents.messages import ModelRequest, ModelResponse, RunStatus
from subagents.models.base import CancelSignal
from subagents.store.memory import MemoryStore

from .conftest import WAIT


class Broken(Exception):
    """Its ``str`` raises ``AttributeError``: ``msg`` is never set."""

    def __str__(self) -> str:
        return str(self.msg)  # type: ignore[attr-defined]  # (never set)


class BrokenModel:
    """Every call raises a Broken."""

    def complete(
        self,
        request: ModelRequest,
        *,
        deadline: float | None = None,
        cancel: CancelSignal | None = None,
    ) -> ModelResponse:
        raise Broken("model")


def test_a_traced_model_error_whose_str_raises_is_named_in_the_run_and_its_span() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    modeled = AgentSpec(name="modeled", description="m")
    with Runtime(
        [modeled], model=BrokenModel(), store=MemoryStore(), tracer_provider=provider
    ) as rt:
        outcome = rt.run("modeled", "go", wait=WAIT)
    assert (outcome.status, outcome.error_kind, outcome.error) == (
        RunStatus.FAILED,
        "crash",
        "Broken: <exception str() failed>",
    )
    [call] = [s for s in exporter.get_finished_spans() if s.name.startswith("chat ")]
    assert call.status.status_code is StatusCode.ERROR
    assert call.attributes is not None
    assert call.attributes["error.type"] == "Broken"
