"""What an LLM run is offered: the tool schemas its model sees, and its model calls traced.

Why apart from ``LLMBehaviour``: both are fixed by the run's setting, not by its
conversation. The offer is decided once per run: the spawn tools name only the agents the
spawn rules let this run start (the same rules admission applies, so a model ignoring the
list is refused there, naming the rule), then the runtime's tools, the user's and built-in
tools, and the MCP tools the hub chose for the definition, each only if the definition allows
it. A model call is the same every step: a span around it when the runtime traces
(``env.tracer``), ended however the call ends.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from subagents.behaviour.fanout import fan_out_schema
from subagents.behaviour.port import AgentEnv, AgentPort
from subagents.behaviour.tools import LOAD_SKILL, RUNTIME_SCHEMAS, Tool, spawn_schema
from subagents.messages import ModelRequest, ModelResponse, ToolSchema
from subagents.models.base import ModelError
from subagents.tools.permissions import ceiling_allows


def offered_tools(
    env: AgentEnv, port: AgentPort, tools: Mapping[str, Tool], mcp_names: Sequence[str]
) -> tuple[ToolSchema, ...]:
    """The schemas of every tool the run of ``port`` may call (``tools``: by name, with the
    run's MCP tools, ``mcp_names``, among them)."""
    spec, record = port.spec, port.record
    schemas: list[ToolSchema] = []
    offer = env.spawn_rules.offer(spec, record.depth, env.agents())
    if offer.agents:
        schemas.append(spawn_schema(offer.agents))
        if offer.fan_out:
            schemas.append(fan_out_schema(list(offer.agents)))
    for name, schema in RUNTIME_SCHEMAS.items():
        if name == LOAD_SKILL and env.skills is None:
            continue
        if spec.allows_tool(name):
            schemas.append(schema)
    # a tool a requester may not use is not offered either (permissions narrow down the tree;
    # the permission policy refuses it anyway)
    ceiling = record.ceiling
    schemas.extend(
        tool.schema
        for name, tool in env.tools.items()
        if spec.allows_tool(name) and ceiling_allows(ceiling, name)
    )
    # MCP tools were chosen for this definition by the hub (mcp/selection.py)
    schemas.extend(tools[name].schema for name in mcp_names if ceiling_allows(ceiling, name))
    return tuple(schemas)


def complete(env: AgentEnv, port: AgentPort, request: ModelRequest) -> ModelResponse:
    """The model's answer to ``request`` (``ModelError`` as the model raised it), traced."""
    traced = env.tracer.model_call(port.record, request) if env.tracer else None
    try:
        response = env.model.complete(request, deadline=port.deadline, cancel=port.cancel)
    except ModelError as exc:
        if traced is not None:
            traced.end(error=f"{exc.kind}: {exc.message}")
        raise
    except BaseException as exc:
        if traced is not None:
            traced.end(error=f"{type(exc).__name__}: {exc}")
        raise
    if traced is not None:
        traced.end(response=response)
    return response
