"""Which MCP servers a definition's runs use, and which of their tools it is offered (pure).

A run sees the runtime-level servers (``Runtime(mcp_servers=...)`` and, with discovery, the
project's ``.mcp.json``), as Claude Code's subagents inherit the main session's, plus the
servers its definition names: ``mcpServers`` (names of runtime-level servers, or inline
``{name: config}``) and ``specializedMCPs`` (names of runtime-level servers). An inline
server with the name of a runtime-level one replaces it for that definition.

Tools are named ``mcp__<server>__<tool>``. A server the definition names is a grant: its
tools are offered whatever ``tools`` lists. The tools of the other runtime-level servers are
offered as every other tool is: when ``tools`` is absent (all tools), or when ``tools`` names
them (``mcp__github__create_issue``, ``mcp__github``, ``mcp__github__*``). ``disallowedTools``
takes away from both, with the same three forms. Only servers that could offer a tool are
started, so an agent with ``tools: Read, Grep`` starts none.

A stdio server written inline in a definition is a command from a file, like a hook: it is
refused (the definition loses that server, with an error naming the agent, the server and
how to allow it) unless the runtime allows definitions' commands (``allow_commands``,
``Runtime(allow_mcp_commands=True)``). Servers given to the runtime by its owner are trusted,
and so is an inline one identical to the runtime's server of that name.
"""

from __future__ import annotations

import fnmatch
import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from subagents.definitions.spec import AgentSpec
from subagents.mcp.config import McpConfigError, NamedServer, StdioServer, parse_server

PREFIX = "mcp__"
MAX_NAME = 64
"""The longest tool name the Messages API takes."""
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def normalize(part: str) -> str:
    """A server or tool name as it appears in a tool name (Claude Code's normalisation)."""
    return _UNSAFE.sub("_", part)


def exposed_name(server: str, tool: str) -> str:
    """``mcp__<server>__<tool>``; one too long for the API keeps a hash of the whole name."""
    name = f"{PREFIX}{normalize(server)}__{normalize(tool)}"
    if len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha1(name.encode()).hexdigest()[:8]
    return f"{name[: MAX_NAME - 9]}_{digest}"


@dataclass(frozen=True)
class McpTool:
    """One tool of one server, as the runtime offers it to a model."""

    server: str
    tool: str
    """The name the server knows it by (what ``tools/call`` sends)."""
    name: str
    """``mcp__<server>__<tool>``: what the model calls."""
    description: str
    input_schema: dict[str, Any]
    read_only: bool = False
    """The server says (``readOnlyHint``) that the tool changes nothing."""
    idempotent: bool = False
    """The server says (``idempotentHint``) that calling it twice does what once does."""


@dataclass(frozen=True)
class RunServers:
    """The servers one definition's runs may use."""

    servers: dict[str, NamedServer] = field(default_factory=dict)
    granted: frozenset[str] = frozenset()
    """Servers the definition named: their tools are offered whatever ``tools`` lists."""
    broken: dict[str, str] = field(default_factory=dict)
    """Server name -> why it cannot be used (a name the runtime does not know, a bad
    configuration); a call to one of its tools answers with this."""


def _entries(value: Any, key: str) -> list[tuple[str, Any | None]]:
    """(name, inline config or None for a reference) from ``mcpServers``'s shapes."""
    if value is None:
        return []
    if isinstance(value, str):
        return [(n.strip(), None) for n in value.split(",") if n.strip()]
    if isinstance(value, Mapping):
        return [(str(n), c) for n, c in value.items()]
    if isinstance(value, list | tuple):
        out: list[tuple[str, Any | None]] = []
        for item in value:
            if isinstance(item, str):
                if item.strip():
                    out.append((item.strip(), None))
            elif isinstance(item, Mapping):
                out.extend((str(n), c) for n, c in item.items())
            else:
                raise McpConfigError(
                    f"{key}: an entry must be a server name or {{name: config}}, got {item!r}"
                )
        return out
    raise McpConfigError(
        f"{key} must be a list of server names or {{name: config}} entries, got {value!r}"
    )


def refused_command(spec: AgentSpec, key: str, server: NamedServer) -> str:
    """Why a definition's own stdio server does not start (no ``allow_mcp_commands``)."""
    source = f" in {spec.source}" if spec.source else ""
    assert isinstance(server.config, StdioServer)
    return (
        f"agent {spec.name!r} declares MCP server {server.name!r} in {key}{source}, which"
        f" would run the command {server.config.describe()!r}: commands from definition"
        f" files do not run unless allowed (Runtime(allow_mcp_commands=True),"
        f" `subagents run --allow-mcp-commands`), or give the server to the runtime"
        f" (Runtime(mcp_servers=...), .mcp.json) and name it in {key}"
    )


def servers_for(
    spec: AgentSpec,
    runtime: Mapping[str, NamedServer],
    *,
    environ: Mapping[str, str] | None = None,
    allow_commands: bool = False,
) -> RunServers:
    """The servers ``spec``'s runs use: the runtime's, plus (and over) the ones it names
    (its own stdio servers only with ``allow_commands``, see the module's docstring)."""
    servers = dict(runtime)
    granted: set[str] = set()
    broken: dict[str, str] = {}
    where = f"agent {spec.name!r}"
    for key, value in (
        ("mcpServers", spec.mcp_servers),
        ("specializedMCPs", spec.metadata.get("specializedMCPs")),
    ):
        try:
            entries = _entries(value, f"{where}: {key}")
        except McpConfigError as exc:
            broken[f"<{key}>"] = str(exc)
            continue
        for name, config in entries:
            granted.add(name)
            if config is None:
                if name not in runtime:
                    known = ", ".join(sorted(runtime)) or "none"
                    broken[name] = (
                        f"{where} names MCP server {name!r} in {key}, but the runtime has no"
                        f" server of that name (runtime servers: {known})"
                    )
                continue
            try:
                server = parse_server(
                    name,
                    config,
                    origin=f"{where} {key}" + (f" in {spec.source}" if spec.source else ""),
                    expand=True,
                    environ=environ,
                )
            except McpConfigError as exc:
                broken[name] = str(exc)
                continue
            trusted = name in runtime and runtime[name].config == server.config
            if isinstance(server.config, StdioServer) and not allow_commands and not trusted:
                broken[name] = refused_command(spec, key, server)
                continue
            servers[name] = server
    for name in broken:
        servers.pop(name, None)
    return RunServers(servers=servers, granted=frozenset(granted), broken=broken)


def _mentions(entry: str, server: str, name: str | None) -> bool:
    """Whether a ``tools``/``disallowedTools`` entry covers a server (name None) or a tool."""
    entry = entry.strip()
    if not entry.startswith(PREFIX):
        return False
    prefix = f"{PREFIX}{normalize(server)}"
    if entry in (prefix, f"{prefix}__*"):
        return True
    if name is None:  # could this entry cover some tool of the server?
        return entry.startswith(f"{prefix}__") or (
            "*" in entry and fnmatch.fnmatchcase(f"{prefix}__x", entry)
        )
    return entry == name or ("*" in entry and fnmatch.fnmatchcase(name, entry))


def offered(spec: AgentSpec, tool: McpTool, granted: Iterable[str]) -> bool:
    """Whether ``spec``'s runs are offered ``tool`` (see the module's docstring)."""
    if any(_mentions(e, tool.server, tool.name) for e in spec.disallowed_tools):
        return False
    if tool.server in granted or spec.tools is None:
        return True
    return any(_mentions(e, tool.server, tool.name) for e in spec.tools)


def wanted(spec: AgentSpec, run_servers: RunServers) -> list[NamedServer]:
    """The servers worth starting for ``spec``: those that could offer it a tool."""
    out: list[NamedServer] = []
    for name, server in run_servers.servers.items():
        if any(
            e.strip() in (f"{PREFIX}{normalize(name)}", f"{PREFIX}{normalize(name)}__*")
            for e in spec.disallowed_tools
        ):
            continue
        if (
            name in run_servers.granted
            or spec.tools is None
            or any(_mentions(e, name, None) for e in spec.tools)
        ):
            out.append(server)
    return out
