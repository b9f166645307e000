"""What an LLM run is offered: its tools (``run_tools``: its MCP servers started), the tool
schemas its model sees, and its model calls traced.

Why apart from ``LLMBehaviour``: both are fixed by the run's setting, not by its
conversation. The offer is decided once per run start: the spawn tools name only the agents
the admission checks let this run spawn (``admission_checks.offer``: the very checks admission
runs, over the standing the supervisor handed the run at its start; a model ignoring the list,
or a list gone stale as its tree grew, is refused at admission, naming the rule), then the
runtime's tools, the user's and built-in tools, and the MCP tools the hub chose for the
definition, each only if the definition allows it. A model call is the same every step: a
span around it when the runtime traces (``env.tracer``), ended however the call ends.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

import msgspec

from subagents.behaviour.failures import named
from subagents.behaviour.fan_out_tool import FAN_OUT, fan_out_schema
from subagents.behaviour.port import AgentEnv, AgentPort
from subagents.behaviour.streaming import Coalescer
from subagents.behaviour.tool_calls import ToolCalls
from subagents.behaviour.tools import (
    LOAD_SKILL,
    RUNTIME_SCHEMAS,
    SPAWN,
    TASK,
    Tool,
    spawn_schema,
    task_schema,
)
from subagents.definitions.spec import AgentSpec
from subagents.mcp.hub import RunMcp
from subagents.mcp.tools import as_tools as mcp_tools
from subagents.messages import (
    ContentBlock,
    ModelRequest,
    ModelResponse,
    PermissionGrant,
    TextBlock,
    ToolSchema,
    ToolUseBlock,
)
from subagents.models.base import ModelError, StreamingModel
from subagents.supervision.admission_checks import offer as spawn_offer
from subagents.supervision.requests import encoding_problem, value_problem
from subagents.tools.permissions import ceiling_allows


def offered_tools(
    env: AgentEnv, port: AgentPort, tools: Mapping[str, Tool], mcp_names: Sequence[str]
) -> tuple[ToolSchema, ...]:
    """The schemas of every tool the run of ``port`` may call (``tools``: by name, with the
    run's MCP tools, ``mcp_names``, among them)."""
    spec, ceiling = port.spec, port.record.ceiling
    schemas: list[ToolSchema] = []
    # A definition that may spawn nothing (a child without tools) is offered no spawn tool:
    # every agent would be refused for that one reason, so no check is asked about any
    # (``not_offered`` finds the reason if its model calls one anyway).
    if env.spawn_rules.grant(spec).disabled is None:
        offer = spawn_offer(port, port.standing, env.spawn_rules, env.agents())
        if offer.agents:
            schemas.append(spawn_schema(offer.agents))
            if spec.allows_tool(TASK):  # Claude Code's name for the same spawn
                schemas.append(task_schema(offer.agents))
            if offer.fan_out:
                schemas.append(fan_out_schema(list(offer.agents)))
    settled = _settled(env, spec, ceiling)
    if not schemas and not mcp_names:  # (most children: no spawn tool, no MCP) the kept one
        return settled
    schemas.extend(settled)
    # MCP tools were chosen for this definition by the hub (mcp/selection.py)
    schemas.extend(tools[name].schema for name in mcp_names if ceiling_allows(ceiling, name))
    return tuple(schemas)


def _settled_schemas(
    env: AgentEnv, spec: AgentSpec, ceiling: tuple[PermissionGrant, ...]
) -> tuple[ToolSchema, ...]:
    """The runtime's tools (but spawning) and the user's and built-in tools ``spec`` allows,
    less those a requester in ``ceiling`` may not use (permissions narrow down the tree; the
    permission policy refuses them anyway)."""
    schemas = [
        schema
        for name, schema in RUNTIME_SCHEMAS.items()
        if (name != LOAD_SKILL or env.skills is not None) and spec.allows_tool(name)
    ]
    schemas.extend(
        tool.schema
        for name, tool in env.tools.items()
        if spec.allows_tool(name) and ceiling_allows(ceiling, name)
    )
    return tuple(schemas)


SETTLED_MAX = 256
"""The most settled offers an ``AgentEnv`` keeps (``AgentEnv.offers``); cleared when full."""


def _settled(
    env: AgentEnv, spec: AgentSpec, ceiling: tuple[PermissionGrant, ...]
) -> tuple[ToolSchema, ...]:
    """``_settled_schemas``, made once per definition, ceiling and runtime tools, not per run.

    Why: they depend on nothing else, and a fan-out's children share all three; made per run
    they were ~20 ``allows_tool`` and ``ceiling_allows`` calls per child. Kept in the
    runtime's ``AgentEnv.offers``; an entry keeps the definition and the tools mapping it
    was made for (compared by identity: a reloaded definition is never served a stale one).
    Thread-safe: the worst a race does is make an entry twice."""
    made_for = env.offers
    try:
        key = (id(spec), env.skills is None, ceiling)
        made = made_for.get(key)
    except TypeError:  # a ceiling that cannot be hashed (built by hand): made each time
        return _settled_schemas(env, spec, ceiling)
    if made is not None and made[0] is spec and made[1] is env.tools:
        return made[2]
    schemas = _settled_schemas(env, spec, ceiling)
    if len(made_for) >= SETTLED_MAX:
        made_for.clear()
    made_for[key] = (spec, env.tools, schemas)
    return schemas


def not_offered(env: AgentEnv, port: AgentPort, name: str, mcp_failure: str | None) -> str:
    """What a model calling ``name``, a tool it was not offered, is told: for a spawn tool
    the reason admission would give (``admission_checks.offer``: the run limit of its tree, a
    depth limit, a spawn rule), for an MCP tool why its server failed, else that it is not
    available."""
    if name in (SPAWN, TASK, FAN_OUT):
        why = spawn_offer(port, port.standing, env.spawn_rules, env.agents()).reason
        if why is not None:
            return f"tool {name!r} is not available to {port.record.agent}: {why}"
    return mcp_failure or f"tool {name!r} is not available to {port.record.agent}"


def complete(env: AgentEnv, port: AgentPort, request: ModelRequest) -> ModelResponse:
    """The model's answer to ``request`` (``ModelError`` as the model raised it), traced;
    streamed, when the model can, through a ``Coalescer`` that reports what it writes (made
    at its first piece: ``LazySink``)."""
    traced = env.tracer.model_call(port.record, request) if env.tracer else None
    sink = _coalescer(env, port, request)
    try:
        if sink is not None:  # (it streams: ``_streams``; no ``cast``, a call per step)
            model: StreamingModel = env.model  # type: ignore[assignment]
            response = model.stream(request, sink, deadline=port.deadline, cancel=port.cancel)
        else:
            response = env.model.complete(request, deadline=port.deadline, cancel=port.cancel)
        unkept = unkept_problem(response)
        if unkept is not None:
            raise ModelError("malformed_response", f"the model's answer cannot be kept: {unkept}")
    except BaseException as exc:
        if sink is not None:
            sink.close(failed=True)
        if traced is not None:
            error = f"{exc.kind}: {exc.message}" if isinstance(exc, ModelError) else None
            traced.end(error=error or named(exc))  # (not ``str(exc)``: it may raise)
        raise
    if sink is not None:
        sink.close(failed=False)
    if traced is not None:
        traced.end(response=response)
    return distinct_ids(response, port)


def _coalescer(env: AgentEnv, port: AgentPort, request: ModelRequest) -> LazySink | None:
    """The sink of a streamed call (None: the model does not stream, or the runtime does
    not want it: ``AgentEnv.stream_interval_s``)."""
    if env.stream_interval_s is None or not _streams(type(env.model)):
        return None
    return LazySink(env.stream_interval_s, port, request)


class LazySink:
    """A ``StreamSink`` that makes its ``Coalescer`` when the first piece comes.

    Why: most model calls of a streaming model tell no piece (a scripted turn without
    ``stream``, a backend that answers whole), and a ``Coalescer`` (a lock, a dozen fields,
    the turn counted over the conversation) made for each was a third of a scripted model
    call. Until a piece comes nothing was shown: a ``void`` or the call's end has nothing
    to say."""

    __slots__ = ("coalescer", "interval", "port", "request")

    def __init__(self, interval: float, port: AgentPort, request: ModelRequest) -> None:
        self.interval = interval
        self.port = port
        self.request = request
        self.coalescer: Coalescer | None = None

    def _made(self) -> Coalescer:
        if self.coalescer is None:
            turn = 1
            for message in self.request.messages:  # (a loop, not ``sum`` of a generator)
                if message.role == "assistant":
                    turn += 1
            port = self.port
            self.coalescer = Coalescer(
                port.report_streamed,
                run_id=port.record.run_id,
                turn=turn,
                interval=self.interval,
                later=port.later,
            )
        return self.coalescer

    def text(self, text: str) -> None:
        self._made().text(text)

    def tool_input(self, tool: str, partial_json: str) -> None:
        self._made().tool_input(tool, partial_json)

    def void(self) -> None:
        if self.coalescer is not None:
            self.coalescer.void()

    def close(self, *, failed: bool) -> None:
        """The call returned or failed: what the coalescer kept is sent, or voided."""
        if self.coalescer is not None:
            self.coalescer.close(failed=failed)


@functools.cache
def _streams(model_type: type) -> bool:
    """Whether models of ``model_type`` stream: asked once per type (an ``isinstance`` of a
    protocol costs about 10 µs, on every model call of every run)."""
    return issubclass(model_type, StreamingModel)


def unkept_problem(response: ModelResponse) -> str | None:
    """Why a model's answer cannot be kept (a text with a lone surrogate, a tool call's input
    nested past ``MAX_NESTING``), or None: the run fails as a malformed response, naming
    it, instead of the answer failing where the supervisor stores the step."""
    for block in response.content:
        if isinstance(block, TextBlock):
            problem = encoding_problem("its text", block.text)
        elif isinstance(block, ToolUseBlock):
            problem = encoding_problem("a tool call's id or name", block.id + block.name)
            problem = problem or value_problem(f"the input of its {block.name} call", block.input)
        else:
            continue
        if problem is not None:
            return problem
    return None


def distinct_ids(response: ModelResponse, port: AgentPort) -> ModelResponse:
    """``response`` with every tool call's id made unique within the turn.

    Why: a turn's calls are answered by id. Two calls sharing one (a model backend's bug,
    not something a real API sends) left the second never run and handed the first's
    answer. A later one is renamed ``ID_2`` (``ID_3``...: never an id the turn already
    has) before anything is recorded or run, so each call runs and is answered under its
    own id, and the conversation the model sees next (the checkpoint, a replay) holds the
    renamed ids with their own answers."""
    uses = response.tool_uses
    if len(uses) < 2:  # the common case: nothing to do (and no set made)
        return response
    seen = {u.id for u in uses}
    if len(seen) == len(uses):  # no id repeated
        return response
    taken: set[str] = set()
    content: list[ContentBlock] = []
    for block in response.content:
        if isinstance(block, ToolUseBlock):
            if block.id in taken:
                n = 2
                while f"{block.id}_{n}" in seen:
                    n += 1
                renamed = f"{block.id}_{n}"
                port.log.warning("tool call id repeated in one turn", id=block.id, now=renamed)
                seen.add(renamed)
                block = msgspec.structs.replace(block, id=renamed)
            taken.add(block.id)
        content.append(block)
    return msgspec.structs.replace(response, content=tuple(content))


def run_tools(
    env: AgentEnv, port: AgentPort, calls: ToolCalls | None
) -> tuple[RunMcp | None, Mapping[str, Tool], tuple[str, ...]]:
    """The run's tools: the runtime's, and its MCP servers' (started now, on this run's
    thread, in its sandbox), whose names are returned too; a run whose tools could not be
    set up (``calls`` None) starts no server. A run without MCP tools reads the runtime's
    own mapping (read only, never changed by a run): no copy of it per run."""
    mcp = None
    if calls is not None and env.mcp is not None and env.mcp.uses_servers(port.spec):
        mcp = env.mcp_for(
            port.spec, deadline=port.deadline, cancel=port.cancel, sandbox=calls.sandbox
        )
    if mcp is None or env.mcp is None:
        return mcp, env.tools, ()
    tools: dict[str, Tool] = dict(env.tools)
    found = {n: t for n, t in mcp_tools(env.mcp, mcp).items() if n not in tools}
    tools.update(found)
    return mcp, tools, tuple(found)
