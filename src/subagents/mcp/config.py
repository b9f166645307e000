"""MCP server configurations in Claude Code's shapes, read into typed values (pure, no I/O
beyond reading a ``.mcp.json`` file).

Claude Code writes a server three ways, and so may a definition, ``Runtime(mcp_servers=...)``
or a project's ``.mcp.json``:

- a local process spoken to over stdio: ``{command, args, env}`` (``type: stdio`` optional);
- a remote server: ``{type: http, url, headers}`` (streamable HTTP) or ``{type: sse, ...}``;
- in a definition only, the *name* of a server the runtime already knows.

Values from files may say ``${VAR}`` or ``${VAR:-default}`` (in the command, args, env values,
url and headers), expanded from the environment as Claude Code does for ``.mcp.json``; a
variable that is unset and has no default is an error naming it, never an empty string that
would start the wrong thing. Every error names the server and where it was configured.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import msgspec

MCP_JSON = ".mcp.json"
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_STDIO_KEYS = frozenset({"type", "command", "args", "env", "cwd"})
_REMOTE_KEYS = frozenset({"type", "url", "headers"})


class McpConfigError(ValueError):
    """A server configuration that cannot be used; says which server, where, and why."""


class StdioServer(msgspec.Struct, frozen=True, kw_only=True):
    """A server the runtime starts as a child process and speaks to over stdin/stdout."""

    command: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    """Extra environment (sorted pairs, so equal configs compare equal): the process gets
    the mcp SDK's safe default environment (HOME, PATH, USER...) plus these."""
    cwd: str | None = None

    @property
    def kind(self) -> Literal["stdio"]:
        return "stdio"

    def describe(self) -> str:
        return " ".join((self.command, *self.args))


Transport = Literal["http", "sse"]
"""How a remote server is reached: streamable HTTP or server-sent events."""


class RemoteServer(msgspec.Struct, frozen=True, kw_only=True):
    """A server reached over the network: streamable HTTP (``http``) or SSE (``sse``)."""

    transport: Transport
    url: str
    headers: tuple[tuple[str, str], ...] = ()

    @property
    def kind(self) -> Transport:
        return self.transport

    def describe(self) -> str:
        return f"{self.transport} {self.url}"


ServerConfig = StdioServer | RemoteServer


class NamedServer(msgspec.Struct, frozen=True):
    """A configured server: its name (as tools name it), its configuration, and where it was
    configured (for error messages). Two runs share one server process when name and
    configuration are equal, wherever they were written."""

    name: str
    config: ServerConfig
    origin: str = "runtime"

    @property
    def key(self) -> tuple[str, ServerConfig]:
        return (self.name, self.config)


def expand_vars(text: str, *, where: str, environ: Mapping[str, str] | None = None) -> str:
    """``${VAR}`` and ``${VAR:-default}`` replaced from ``environ`` (``os.environ``)."""
    env = os.environ if environ is None else environ

    def replace(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        value = env.get(name)
        if value is not None:
            return value
        if default is not None:
            return default
        raise McpConfigError(f"{where}: environment variable {name} is not set (and no default)")

    return _VAR.sub(replace, text)


def parse_server(
    name: str,
    raw: Any,
    *,
    origin: str = "runtime",
    expand: bool = False,
    environ: Mapping[str, str] | None = None,
) -> NamedServer:
    """One server from its Claude Code shape (or a ``StdioServer`` / ``RemoteServer``)."""
    where = f"MCP server {name!r} ({origin})"
    if not isinstance(name, str) or not name.strip():
        raise McpConfigError(f"an MCP server name must be non-empty text, got {name!r} ({origin})")
    if isinstance(raw, StdioServer | RemoteServer):
        return NamedServer(name, raw, origin)
    if not isinstance(raw, Mapping):
        raise McpConfigError(
            f"{where}: expected a mapping like {{command, args, env}} or {{type, url, headers}},"
            f" got {type(raw).__name__}"
        )

    read = _ServerReader(where, expand, environ)
    kind = read.kind(raw)
    if kind == "stdio":
        return NamedServer(name, read.stdio(raw), origin)
    if kind in ("http", "sse"):
        return NamedServer(name, read.remote(raw, kind), origin)
    raise McpConfigError(f"{where}: unknown type {kind!r}; use stdio, http or sse")


class _ServerReader:
    """Reads one server's mapping, each error naming the server (``where``) and the key;
    with ``expand``, text values have their ``${VAR}`` expanded from ``environ``."""

    def __init__(self, where: str, expand: bool, environ: Mapping[str, str] | None) -> None:
        self.where, self.expand, self.environ = where, expand, environ

    def text(self, value: Any, key: str) -> str:
        where = self.where
        if not isinstance(value, str):
            raise McpConfigError(f"{where}: {key} must be text, got {value!r}")
        if not self.expand:
            return value
        return expand_vars(value, where=f"{where} {key}", environ=self.environ)

    def pairs(self, value: Any, key: str) -> tuple[tuple[str, str], ...]:
        if value is None:
            return ()
        if not isinstance(value, Mapping):
            raise McpConfigError(f"{self.where}: {key} must be a mapping of names to text")
        out = []
        for k, v in value.items():
            if isinstance(v, bool) or not isinstance(v, str | int | float):
                raise McpConfigError(f"{self.where}: {key}.{k} must be text, got {v!r}")
            out.append((str(k), self.text(str(v), f"{key}.{k}")))
        return tuple(sorted(out))

    def kind(self, raw: Mapping[str, Any]) -> str:
        """The transport: ``type``, else stdio for a server with a command, else http."""
        kind = raw.get("type")
        if kind is not None and not isinstance(kind, str):
            raise McpConfigError(f"{self.where}: type must be text, got {kind!r}")
        kind = (kind or "").strip().lower() or ("stdio" if "command" in raw else "http")
        if kind == "streamable-http" or kind == "streamable_http":
            kind = "http"
        return kind

    def stdio(self, raw: Mapping[str, Any]) -> StdioServer:
        where = self.where
        unknown = sorted(set(map(str, raw)) - _STDIO_KEYS)
        if unknown:
            raise McpConfigError(
                f"{where}: unknown key(s) {', '.join(unknown)} for a stdio server"
                " (it takes command, args, env, cwd)"
            )
        command = raw.get("command")
        if command is None:
            raise McpConfigError(f"{where}: a stdio server needs a command")
        command = self.text(command, "command")
        if not command.strip():
            raise McpConfigError(f"{where}: command is empty")
        args_raw = raw.get("args") or []
        if isinstance(args_raw, str) or not isinstance(args_raw, list | tuple):
            raise McpConfigError(f"{where}: args must be a list of text, got {args_raw!r}")
        args = tuple(
            self.text(str(a) if isinstance(a, int | float) else a, "args") for a in args_raw
        )
        cwd = raw.get("cwd")
        return StdioServer(
            command=command,
            args=args,
            env=self.pairs(raw.get("env"), "env"),
            cwd=None if cwd is None else self.text(cwd, "cwd"),
        )

    def remote(self, raw: Mapping[str, Any], kind: str) -> RemoteServer:
        where = self.where
        unknown = sorted(set(map(str, raw)) - _REMOTE_KEYS)
        if unknown:
            raise McpConfigError(
                f"{where}: unknown key(s) {', '.join(unknown)} for an {kind} server"
                " (it takes type, url, headers)"
            )
        url = raw.get("url")
        if url is None:
            raise McpConfigError(f"{where}: an {kind} server needs a url")
        url = self.text(url, "url")
        if not re.match(r"^https?://", url):
            raise McpConfigError(f"{where}: url must start with http:// or https://, got {url!r}")
        transport: Transport = "http" if kind == "http" else "sse"
        return RemoteServer(
            transport=transport, url=url, headers=self.pairs(raw.get("headers"), "headers")
        )


def parse_servers(
    raw: Any,
    *,
    origin: str = "runtime",
    expand: bool = False,
    environ: Mapping[str, str] | None = None,
) -> dict[str, NamedServer]:
    """``{name: config}`` (or ``{"mcpServers": {...}}``, the ``.mcp.json`` shape)."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise McpConfigError(
            f"MCP servers ({origin}) must be a mapping of server names to configurations,"
            f" got {type(raw).__name__}"
        )
    if set(raw) == {"mcpServers"}:
        raw = raw["mcpServers"]
        if not isinstance(raw, Mapping):
            raise McpConfigError(f"mcpServers ({origin}) must be a mapping of names to servers")
    return {
        str(name): parse_server(str(name), value, origin=origin, expand=expand, environ=environ)
        for name, value in raw.items()
    }


def read_mcp_json(
    path: Path,
    *,
    environ: Mapping[str, str] | None = None,
    problems: list[str] | None = None,
) -> dict[str, NamedServer]:
    """A project's ``.mcp.json`` (``{"mcpServers": {...}}``), with ``${VAR}`` expanded.

    With ``problems`` (a list), a server that cannot be used is left out and its error
    appended there, so one bad entry does not cost the others; without, it raises."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise McpConfigError(f"{path}: cannot be read: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise McpConfigError(f"{path}: not valid JSON: {exc}") from None
    if not isinstance(data, Mapping) or not isinstance(data.get("mcpServers", {}), Mapping):
        raise McpConfigError(f'{path}: expected {{"mcpServers": {{name: server, ...}}}}')
    if problems is None:
        return parse_servers(
            data.get("mcpServers", {}), origin=str(path), expand=True, environ=environ
        )
    servers: dict[str, NamedServer] = {}
    for name, raw in data.get("mcpServers", {}).items():
        try:
            servers[str(name)] = parse_server(
                str(name), raw, origin=str(path), expand=True, environ=environ
            )
        except McpConfigError as exc:
            problems.append(str(exc))
    return servers


def find_mcp_json(start: Path) -> Path | None:
    """The nearest ``.mcp.json`` walking up from ``start`` (Claude Code's project file)."""
    start = start.absolute()
    for folder in (start, *start.parents):
        candidate = folder / MCP_JSON
        if candidate.is_file():
            return candidate
    return None
