"""McpHub: a runtime's MCP servers, started lazily, shared by its runs, stopped on close.

Agent runs live on threads; the mcp SDK lives on an anyio event loop. The hub owns ONE event
loop thread (started the first time a server is needed, so a runtime without MCP has none)
and every session lives on it (``connection.py``). Agent threads ask through an anyio
``BlockingPortal``: a start or a call is a task on the loop and a ``concurrent.futures``
future on the caller's side, which the caller waits on while watching its run's deadline and
cancel signal. A run that is stopped or reaches its deadline cancels its call (the SDK tells
the server with ``notifications/cancelled``) and gets an error at once.

A server is keyed by its name and configuration: two definitions naming the same runtime
server, or writing the same inline one, share one process. A server that failed to start
stays failed for the hub's life (a start can take the whole start timeout; trying again for
every run would make each one wait as long); one that died after it was ready is started
again for the next run that needs it, while the calls of runs already holding it answer
with the error that killed it.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import math
import os
import sys
import threading
import time
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from subagents.definitions.spec import AgentSpec
from subagents.logs import get_logger
from subagents.mcp.config import (
    McpConfigError,
    NamedServer,
    StdioServer,
    find_mcp_json,
    parse_servers,
    read_mcp_json,
)
from subagents.mcp.connection import McpServerError, ServerConnection
from subagents.mcp.results import cap, render_content
from subagents.mcp.selection import (
    PREFIX,
    McpTool,
    RunServers,
    normalize,
    offered,
    servers_for,
    wanted,
)
from subagents.models.base import CancelSignal
from subagents.tools.sandbox import RunSandbox

if TYPE_CHECKING:
    from anyio.from_thread import BlockingPortal

log = get_logger("subagents.mcp")
T = TypeVar("T")

START_TIMEOUT = 30.0
"""Seconds a server has to start, answer ``initialize`` and list its tools."""
CALL_TIMEOUT = 600.0
"""Seconds one tool call may take before it fails (and is cancelled): a hung server fails
that call, which the model sees, rather than the whole run at its deadline."""
CLOSE_MARGIN_S = 1.0
"""How long before the close's end every server's end is over (``ServerConnection.stop``'s
``until``): what is left (its task's end, the loop's) within the close."""


def mcp_start_timeout() -> float:
    """``MCP_TIMEOUT`` (milliseconds, as Claude Code reads it) or ``START_TIMEOUT``."""
    return _milliseconds("MCP_TIMEOUT", START_TIMEOUT)


def mcp_tool_timeout(given: float | None = None) -> float:
    """A call's timeout in seconds: ``given`` (the runtime's setting), else
    ``MCP_TOOL_TIMEOUT`` (milliseconds, as Claude Code reads it), else ``CALL_TIMEOUT``."""
    if given is not None:
        number = isinstance(given, int | float) and not isinstance(given, bool)
        # (NaN, infinity and an int past every float fail the range; such an int is not shown:
        # its repr can raise, past Python's digits limit)
        if not (number and 0 < given <= sys.float_info.max):
            shown = "an int above 1e+308" if number and given > 0 else repr(given)
            raise ValueError(f"mcp_tool_timeout must be a positive number of seconds, not {shown}")
        return float(given)
    return _milliseconds("MCP_TOOL_TIMEOUT", CALL_TIMEOUT)


def _milliseconds(variable: str, default: float) -> float:
    raw = os.environ.get(variable, "").strip()
    if not raw:
        return default
    try:
        value = float(raw) / 1000.0
    except ValueError:
        log.warning(f"{variable} is not a number of milliseconds; using the default", value=raw)
        return default
    if not math.isfinite(value) or value <= 0:
        log.warning(f"{variable} must be a positive number of milliseconds", value=raw)
        return default
    return value


RESOURCE_TOOLS = ("ListMcpResourcesTool", "ReadMcpResourceTool")
"""Claude Code's tools for servers' resources (mcp/resources.py)."""

POLL_S = 0.05
"""How often a waiting caller looks at its run's cancel signal."""


class McpCallError(Exception):
    """A call that did not complete: the run was stopped, or its deadline passed."""

    def __init__(self, server: str, message: str) -> None:
        self.server = server
        super().__init__(message)


@dataclass(frozen=True)
class McpCallResult:
    """What a tool call gave back: text for the model, and whether the server called it an
    error (``isError``: the model should see it as one)."""

    text: str
    is_error: bool = False


@dataclass(frozen=True)
class RunMcp:
    """The MCP tools one run is offered, how to reach them, and the servers that failed."""

    tools: tuple[McpTool, ...] = ()
    servers: dict[str, NamedServer] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)
    """Server name -> why its tools are missing (could not start, bad configuration)."""
    sandbox: RunSandbox | None = None
    """The run's sandbox, which its servers' processes were started in."""
    started: tuple[str, ...] = ()
    """The servers started for this run: whose resources it may list and read."""
    resource_tools: tuple[str, ...] = ()
    """Which of Claude Code's resource tools its definition allows (mcp/resources.py)."""

    def tool(self, name: str) -> McpTool | None:
        for tool in self.tools:
            if tool.name == name:
                return tool
        return None

    def failure_for(self, name: str) -> str | None:
        """Why ``name`` (``mcp__<server>__...``) is missing, when its server failed."""
        if not name.startswith(PREFIX):
            return None
        for server, reason in self.failures.items():
            if name.startswith(f"{PREFIX}{normalize(server)}__") or name == (
                f"{PREFIX}{normalize(server)}"
            ):
                return reason
        return None


class _Loop:
    """One thread running an anyio event loop with a blocking portal into it."""

    def __init__(self, name: str) -> None:
        self._ready: concurrent.futures.Future[BlockingPortal] = concurrent.futures.Future()
        self.thread = threading.Thread(target=self._main, name=name, daemon=True)
        self.thread.start()
        self.portal = self._ready.result(timeout=30.0)

    def _main(self) -> None:
        # anyio is imported here, when the first server starts: a runtime without MCP
        # servers (most runs) never pays for it
        import anyio
        from anyio.from_thread import BlockingPortal

        async def run() -> None:
            async with BlockingPortal() as portal:
                self._ready.set_result(portal)
                await portal.sleep_until_stopped()

        try:
            anyio.run(run)
        except BaseException as exc:  # the loop could not start: tell the starter
            if not self._ready.done():
                self._ready.set_exception(exc)
            else:
                log.exception("mcp event loop ended with an error")

    def close(self, timeout: float) -> None:
        with contextlib.suppress(RuntimeError):  # already stopped
            self.portal.call(self.portal.stop, True)
        self.thread.join(timeout)
        if self.thread.is_alive():
            log.warning("mcp event loop thread did not end in time", timeout=timeout)


def _trusted(
    found: Mapping[str, NamedServer], path: Path, allow_commands: bool
) -> dict[str, NamedServer]:
    """The servers of a project's ``.mcp.json`` that may start: a stdio server runs a command
    from a file of the project (a cloned repository's, perhaps), so, as Claude Code asks
    before it starts a project's servers, it starts only with ``allow_commands``; remote
    servers start no command."""
    kept: dict[str, NamedServer] = {}
    for name, server in found.items():
        if isinstance(server.config, StdioServer) and not allow_commands:
            log.warning(
                "mcp server in .mcp.json not started",
                server=name,
                error=f"{path} declares MCP server {name!r}, which would run the command"
                f" {server.config.describe()!r}: commands from a project's files do not run"
                " unless allowed (Runtime(allow_mcp_commands=True),"
                " `subagents run --allow-mcp-commands`) or given in code"
                " (Runtime(mcp_servers=...))",
            )
            continue
        kept[name] = server
    return kept


class McpHub:
    """The runtime-level servers, and every server process the runtime's runs started."""

    def __init__(
        self,
        servers: Mapping[str, NamedServer] | None = None,
        *,
        cwd: str | Path | None = None,
        start_timeout: float = START_TIMEOUT,
        environ: Mapping[str, str] | None = None,
        allow_commands: bool = False,
        call_timeout: float = CALL_TIMEOUT,
    ) -> None:
        self.servers: dict[str, NamedServer] = dict(servers or {})
        self.allow_commands = allow_commands
        """Whether a definition's own stdio servers may start (``selection.servers_for``)."""
        self.cwd = None if cwd is None else str(cwd)
        self.start_timeout = start_timeout
        self.call_timeout = call_timeout
        """Seconds one tool call may take (``mcp_tool_timeout``)."""
        self.environ = environ
        self._lock = threading.Lock()
        self._loop: _Loop | None = None
        self._connections: dict[Any, ServerConnection] = {}
        self._closed = False
        self._warned: set[tuple[str, str]] = set()
        self.lease_env: dict[str, str] = {}
        """The runtime's lease line, named for the reaper of each stdio server started from
        now (``tools.lease_line``; set once the lease keeper publishes it): a stalled host's
        servers die before its runs can be taken over."""

    def blueprint(self) -> dict[str, Any]:
        """What makes an equal hub in another process (a cluster's node): its servers and
        settings, plain data; ``McpHub(**blueprint)`` there starts its own processes."""
        return {
            "servers": dict(self.servers),
            "cwd": self.cwd,
            "start_timeout": self.start_timeout,
            "call_timeout": self.call_timeout,
            "environ": None if self.environ is None else dict(self.environ),
            "allow_commands": self.allow_commands,
        }

    @classmethod
    def from_config(
        cls,
        mcp_servers: Any = None,
        *,
        discover: bool = False,
        cwd: str | Path | None = None,
        start_timeout: float = START_TIMEOUT,
        allow_commands: bool = False,
        call_timeout: float = CALL_TIMEOUT,
    ) -> McpHub:
        """Runtime-level servers from ``Runtime(mcp_servers=...)`` (``McpConfigError`` when
        one is wrong) and, with ``discover``, the nearest ``.mcp.json`` up from ``cwd`` (a bad
        entry there is logged and left out); a server given in code wins over the file's."""
        problems: list[str] = []
        servers: dict[str, NamedServer] = {}
        if discover:
            found = find_mcp_json(Path(cwd) if cwd is not None else Path.cwd())
            if found is not None:
                # a file is not the caller's code: a broken one is a warning, not a failure
                try:
                    servers.update(
                        _trusted(read_mcp_json(found, problems=problems), found, allow_commands)
                    )
                except McpConfigError as exc:
                    log.warning("mcp servers in .mcp.json not used", error=str(exc))
                for problem in problems:
                    log.warning("mcp server in .mcp.json not used", error=problem)
        given = parse_servers(mcp_servers, origin="Runtime(mcp_servers=...)")
        for name in set(given) & set(servers):
            log.info("mcp server in code replaces the one in .mcp.json", server=name)
        servers.update(given)
        return cls(
            servers,
            cwd=cwd,
            start_timeout=start_timeout,
            allow_commands=allow_commands,
            call_timeout=call_timeout,
        )

    # ---- what a run is offered ----------------------------------------------------------------

    def _servers_for(self, spec: AgentSpec) -> RunServers:
        return servers_for(
            spec, self.servers, environ=self.environ, allow_commands=self.allow_commands
        )

    def uses_servers(self, spec: AgentSpec) -> bool:
        """Whether ``spec``'s runs could use any server (cheap: nothing is started)."""
        if (
            not self.servers
            and spec.mcp_servers is None
            and not spec.metadata.get("specializedMCPs")
        ):
            return False
        try:
            run_servers = self._servers_for(spec)
        except McpConfigError:
            return True
        return bool(wanted(spec, run_servers) or run_servers.broken)

    def tools_for(
        self,
        spec: AgentSpec,
        *,
        deadline: float | None = None,
        cancel: CancelSignal | None = None,
        sandbox: RunSandbox | None = None,
    ) -> RunMcp:
        """The MCP tools ``spec``'s run is offered, starting the servers it needs (in parallel,
        each at most once per runtime and sandbox: runs whose sandboxes differ, a read-only
        run and a writing one, do not share a server process); a server that cannot start is
        in ``failures``."""
        run_servers = self._servers_for(spec)
        failures = dict(run_servers.broken)
        for reason in run_servers.broken.values():
            if (spec.name, reason) not in self._warned:  # once, not at every run
                self._warned.add((spec.name, reason))
                log.warning("mcp server not usable", agent=spec.name, error=reason)
        targets = wanted(spec, run_servers)
        if not targets:
            return RunMcp(servers=run_servers.servers, failures=failures, sandbox=sandbox)
        connections = [self._connection(server, fresh=True, sandbox=sandbox) for server in targets]
        tools: list[McpTool] = []
        seen: dict[str, str] = {}
        for connection in connections:
            try:
                listed = _wait(
                    connection.started,
                    deadline=deadline,
                    cancel=cancel,
                    server=connection.name,
                    what="starting",
                    cancel_future=False,  # other runs may be waiting for the same start
                )
            except (McpServerError, McpCallError) as exc:
                failures[connection.name] = str(exc)
                continue
            for tool in listed:
                if not offered(spec, tool, run_servers.granted):
                    continue
                if tool.name in seen:
                    log.warning(
                        "mcp tool name taken by another server; skipped",
                        tool=tool.name,
                        server=tool.server,
                        kept=seen[tool.name],
                    )
                    continue
                seen[tool.name] = tool.server
                tools.append(tool)
        started = tuple(c.name for c in connections if c.name not in failures)
        return RunMcp(
            tools=tuple(tools),
            servers=run_servers.servers,
            failures=failures,
            started=started,
            resource_tools=tuple(n for n in RESOURCE_TOOLS if spec.allows_tool(n)),
            sandbox=sandbox,
        )

    # ---- calls --------------------------------------------------------------------------------

    def call(
        self,
        run: RunMcp,
        name: str,
        arguments: Mapping[str, Any],
        *,
        deadline: float | None = None,
        cancel: CancelSignal | None = None,
        timeout: float | None = None,
    ) -> McpCallResult:
        """Call ``name`` (``mcp__<server>__<tool>``) for a run; the server's answer as text.

        Raises ``McpServerError`` (the server is not running or died), ``McpCallError`` (the
        run was stopped, its deadline passed, or the call took longer than ``timeout``, by
        default the hub's ``call_timeout``: the call is cancelled, the server lives on) or
        ``LookupError`` (not one of the run's tools); a protocol error from the server comes
        back as an ``is_error`` result."""
        tool = run.tool(name)
        if tool is None:
            reason = run.failure_for(name)
            if reason is not None:
                raise McpServerError(name.split("__")[1] if "__" in name else name, reason)
            raise LookupError(f"{name} is not an MCP tool of this run")
        server = run.servers[tool.server]
        connection = self._connection(server, fresh=False, sandbox=run.sandbox)
        assert self._loop is not None
        try:
            future = self._loop.portal.start_task_soon(
                connection.call, tool.tool, dict(arguments), name
            )
        except RuntimeError:  # the loop has stopped: the runtime is closing
            raise McpServerError(tool.server, f"{name}: the runtime is closing") from None
        from mcp import MCPError

        try:
            result = _wait(
                future,
                deadline=deadline,
                cancel=cancel,
                server=tool.server,
                what=f"calling {name}",
                cancel_future=True,
                call_timeout=self.call_timeout if timeout is None else timeout,
            )
        except MCPError as exc:
            return McpCallResult(
                cap(f"MCP server {tool.server!r} refused the call to {tool.tool}: {exc.message}"),
                is_error=True,
            )
        return McpCallResult(
            render_content(list(result.content or ()), result.structured_content),
            is_error=bool(result.is_error),
        )

    def ask_server(
        self,
        run: RunMcp,
        server: str,
        request: Callable[[ServerConnection], Coroutine[Any, Any, T]],
        *,
        what: str,
        deadline: float | None = None,
        cancel: CancelSignal | None = None,
    ) -> T:
        """``request(connection)`` on one of the servers started for ``run`` (its resources:
        mcp/resources.py), bounded like a call. ``LookupError`` for another server."""
        if server not in run.started:
            known = ", ".join(run.started) or "none"
            raise LookupError(f"no MCP server {server!r} for this run (its servers: {known})")
        connection = self._connection(run.servers[server], fresh=False, sandbox=run.sandbox)
        _wait(connection.started, deadline=deadline, cancel=cancel, server=server,
              what="starting", cancel_future=False)  # fmt: skip
        assert self._loop is not None
        try:
            future = self._loop.portal.start_task_soon(request, connection)
        except RuntimeError:  # the loop has stopped: the runtime is closing
            raise McpServerError(server, f"{what}: the runtime is closing") from None
        answer: T = _wait(future, deadline=deadline, cancel=cancel, server=server, what=what,
                          cancel_future=True, call_timeout=self.call_timeout)  # fmt: skip
        return answer

    # ---- lifecycle ----------------------------------------------------------------------------

    def _connection(
        self, server: NamedServer, *, fresh: bool, sandbox: RunSandbox | None = None
    ) -> ServerConnection:
        """The connection for ``server`` in ``sandbox``, started if new (or, with ``fresh``,
        if it died). A remote server starts no process: one connection for every sandbox."""
        if not isinstance(server.config, StdioServer):
            sandbox = None
        with self._lock:
            if self._closed:
                raise McpServerError(
                    server.name, f"MCP server {server.name!r}: the runtime is closed"
                )
            key = (server.key, sandbox)
            connection = self._connections.get(key)
            if connection is not None and not (fresh and connection.state == "dead"):
                return connection
            if self._loop is None:
                self._loop = _Loop("subagents-mcp")
            connection = ServerConnection(
                server, start_timeout=self.start_timeout, cwd=self.cwd, sandbox=sandbox
            )
            connection.lease_env = self.lease_env
            connection.serving = self._loop.portal.start_task_soon(
                connection.serve, name=f"mcp:{server.name}"
            )
            self._connections[key] = connection
            log.info("mcp server starting", server=server.name, origin=server.origin)
            return connection

    def status(self) -> dict[str, str]:
        """Server name -> new / starting / ready / failed / dead / stopped (started ones)."""
        with self._lock:
            return {c.name: c.state for c in self._connections.values()}

    @property
    def loop_thread(self) -> threading.Thread | None:
        return None if self._loop is None else self._loop.thread

    def close(self, timeout: float = 10.0) -> None:
        """Stop every server (the stdio transport closes stdin, then the SDK's SIGTERM and
        SIGKILL to its process group; a detached launcher's, a node host's, stopped through
        its pidfd: ``held.end_detached``) and the event loop thread; bounded by ``timeout``
        (a server not ended by then is said, by name: its stop sent, its lifeline closed)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            loop, self._loop = self._loop, None
            connections = list(self._connections.values())
        if loop is None:
            return
        deadline = time.monotonic() + timeout
        for connection in connections:  # each server's end by ``CLOSE_MARGIN_S`` before
            try:
                loop.portal.call(connection.stop, deadline - CLOSE_MARGIN_S)
            except RuntimeError:
                break
        serving = [c.serving for c in connections if c.serving is not None]
        if serving:
            concurrent.futures.wait(serving, timeout=max(0.0, deadline - time.monotonic()))
        for connection in connections:
            if connection.serving is not None and not connection.serving.done():
                log.warning("mcp server not ended within the close", server=connection.name)
        loop.close(max(0.1, deadline - time.monotonic()))

    def __enter__(self) -> McpHub:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _wait(
    future: concurrent.futures.Future[T],
    *,
    deadline: float | None,
    cancel: CancelSignal | None,
    server: str,
    what: str,
    cancel_future: bool,
    call_timeout: float | None = None,
) -> T:
    """``future``'s result, unless the run is stopped, its deadline passes or the call takes
    longer than ``call_timeout`` seconds first."""
    limit = None if call_timeout is None else time.monotonic() + call_timeout
    while True:
        timeout: float | None = POLL_S if cancel is not None else None
        now = time.monotonic()
        for until, by_limit in ((deadline, False), (limit, True)):
            if until is None:
                continue
            remaining = until - now
            if remaining <= 0:
                if cancel_future:
                    future.cancel()
                why = (
                    f"{what} timed out after {call_timeout:g} s (the per-call limit:"
                    " Runtime(mcp_tool_timeout=...) or MCP_TOOL_TIMEOUT); it was cancelled"
                    if by_limit
                    else f"the run's deadline passed while {what}"
                )
                raise McpCallError(server, f"MCP server {server!r}: {why}")
            timeout = remaining if timeout is None else min(timeout, remaining)
        done, _ = concurrent.futures.wait([future], timeout=timeout)
        if done:
            try:
                return future.result()
            except concurrent.futures.CancelledError:
                raise McpCallError(server, f"MCP server {server!r}: {what} was cancelled") from None
        if cancel is not None and cancel.is_set():
            if cancel_future:
                future.cancel()
            raise McpCallError(server, f"MCP server {server!r}: the run was stopped while {what}")
