"""Tracing runs on a cluster's nodes: each model and tool call's span goes to the driver as
data, and the driver's ``Telemetry`` makes it there.

Why not a tracer provider on each node: a provider (its exporters, its processors, their
threads) does not pickle, and the run spans (``invoke_agent``) are made by the driver from
the supervisor's events, so a call span made on a node would need the same provider, the
same id scheme and a way to be flushed before the driver closes. Instead a node records
what the driver's ``Telemetry.model_call`` / ``tool_call`` would have recorded (the same
names and attributes, ``telemetry.model_call_span`` and friends), with the node's clock,
and sends it when the call ends, through the outbox its agents already report through
(``FinishedCall``); the driver makes the span under the run's, with those times. One trace,
whatever node a run was on; the node needs no OpenTelemetry package.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from subagents.messages import ModelRequest, ModelResponse, RunRecord
from subagents.telemetry import (
    FinishedCall,
    call_end_attributes,
    model_call_span,
    tool_call_span,
)


class NodeCallTracer:
    """A node's ``behaviour.port.CallTracer``: finished calls go to ``sink`` (set once the
    node's link to the driver is up; a call that ends before that is dropped)."""

    def __init__(self) -> None:
        self.sink: Callable[[FinishedCall], None] | None = None

    def model_call(self, record: RunRecord, request: ModelRequest) -> _NodeCall:
        name, attributes = model_call_span(record, request)
        return _NodeCall(self, name, True, record, attributes)

    def tool_call(
        self, record: RunRecord, call_id: str, name: str, arguments: Mapping[str, Any]
    ) -> _NodeCall:
        span_name, attributes = tool_call_span(record, call_id, name)
        return _NodeCall(self, span_name, False, record, attributes)


class _NodeCall:
    """A call under way on the node; ``end`` sends it, once."""

    def __init__(
        self,
        tracer: NodeCallTracer,
        name: str,
        client: bool,
        record: RunRecord,
        attributes: dict[str, Any],
    ) -> None:
        self.tracer = tracer
        self.name = name
        self.client = client
        self.record = record
        self.attributes = attributes
        self.start_ns = time.time_ns()

    def end(self, *, error: str | None = None, response: ModelResponse | None = None) -> None:
        sink = self.tracer.sink
        if sink is None:
            return
        sink(
            FinishedCall(
                name=self.name,
                client=self.client,
                run_id=self.record.run_id,
                root_run_id=self.record.root_run_id,
                attributes={**self.attributes, **call_end_attributes(error, response)},
                start_ns=self.start_ns,
                end_ns=time.time_ns(),
                error=error,
            )
        )
