"""One MCP server's session, owned by one task on the hub's event loop.

The mcp SDK is anyio-based and its transports are context managers whose task groups must
be entered and left by the same task, so each server gets one long-lived task (``serve``)
that opens the transport and the ``ClientSession``, lists the tools, reports them through
``started`` (a ``concurrent.futures.Future`` other threads wait on), and then holds the
session open until it is stopped. Calls (``call``) run as tasks of their own on the same
loop and share the session, which multiplexes requests.

A server never makes anyone wait for ever: starting is bounded by ``start_timeout`` (the
task's cancel scope has that deadline until the server is ready); a server that exits or
crashes closes its connection, which fails the calls in flight at once (the SDK answers them
``Connection closed``); from then on the connection is dead and every call says why, naming
the server and quoting the end of its stderr, which is kept in a temporary file rather than
written over the live view of the terminal.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import math
import os
import shutil
import sys
import tempfile
from contextlib import AsyncExitStack
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from subagents.logs import get_logger
from subagents.mcp.config import NamedServer, RemoteServer, StdioServer
from subagents.mcp.selection import McpTool, exposed_name
from subagents.tools.detached import detaches
from subagents.tools.held import (
    NamedStatus,
    end_detached,
    heard,
    how_it_ended,
    named_status,
    stopped_first,
)
from subagents.tools.processes import held_argv
from subagents.tools.reaper import LEASE_VARIABLE
from subagents.tools.sandbox import RunSandbox, SandboxRefused
from subagents.tools.scratch import MCP_DIR, make_dir, remove_dir

if TYPE_CHECKING:
    import anyio

log = get_logger("subagents.mcp")

STDERR_TAIL = 1_500
"""How much of a dead server's stderr an error quotes (characters)."""
_SDK = ("mcp", "mcp_types", "httpx2")
_LIST_PAGES = 100
"""A server whose tool list never ends is cut off here rather than listed for ever."""


class McpServerError(Exception):
    """A server that could not start, stopped answering, or is not running; names it."""

    def __init__(self, server: str, message: str) -> None:
        self.server = server
        super().__init__(message)


class ServerConnection:
    """A server's lifecycle: new -> starting -> ready -> (stopped | dead), or failed."""

    def __init__(
        self,
        server: NamedServer,
        *,
        start_timeout: float,
        cwd: str | None = None,
        client_name: str = "subagents",
        sandbox: RunSandbox | None = None,
    ) -> None:
        self.server = server
        self.sandbox = sandbox
        """The sandbox of the run that started it (``tools.sandbox``): a stdio server's
        process starts in it, with a temporary directory of its own; None: unsandboxed."""
        self._temp: str | None = None
        self.lease_env: dict[str, str] = {}
        """The runtime's lease line for the server's reaper (``McpHub.lease_env``)."""
        self.start_timeout = start_timeout
        self.cwd = cwd
        self.client_name = client_name
        self.started: concurrent.futures.Future[tuple[McpTool, ...]] = concurrent.futures.Future()
        self.serving: concurrent.futures.Future[None] | None = None
        """The ``serve`` task's future, set by the hub when it starts the task."""
        self._session: Any = None
        self._scope: anyio.CancelScope | None = None
        self._stopping = False
        self._until: float | None = None
        self._dead: str | None = None
        self._stderr: IO[str] | None = None
        self._stderr_tail = ""
        self._said: bytes | None = None
        """What the server's reaper said on its status pipe by the transport's end (``exit
        N`` when the server ended: ``_end_note``); None: not held, or not ended yet."""

    @property
    def name(self) -> str:
        return self.server.name

    @property
    def state(self) -> str:
        if self._dead is not None:
            return "dead"
        if not self.started.done():
            return "starting" if self.serving is not None else "new"
        if self.started.exception() is not None:
            return "failed"
        return "stopped" if self._session is None else "ready"

    def _label(self) -> str:
        return (
            f"MCP server {self.name!r} ({self.server.config.describe()}, from {self.server.origin})"
        )

    # ---- the owning task ----------------------------------------------------------------------

    async def serve(self) -> None:
        """Open, initialise, list the tools, then hold the session until stopped."""
        import anyio  # here, on the hub's loop: importing the module costs no anyio

        scope = anyio.CancelScope(deadline=anyio.current_time() + self.start_timeout)
        self._scope = scope
        if self._stopping:
            scope.cancel()
        failure: BaseException | None = None
        try:
            with scope:
                async with AsyncExitStack() as stack:
                    read, write = await self._open(stack)
                    from mcp import ClientSession
                    from mcp.types import Implementation

                    session = await stack.enter_async_context(
                        ClientSession(
                            read,
                            write,
                            client_info=Implementation(name=self.client_name, version="0"),
                        )
                    )
                    await session.initialize()
                    tools = await self._list_tools(session)
                    self._session = session
                    scope.deadline = math.inf  # ready: from now on only a stop ends it
                    self.started.set_result(tools)
                    log.info(
                        "mcp server ready",
                        server=self.name,
                        tools=len(tools),
                        transport=self.server.config.kind,
                    )
                    await anyio.sleep_forever()
        except Exception as exc:
            failure = exc
        finally:
            self._session = None
            self._capture_stderr()
            if not self.started.done():
                try:
                    reason = self._start_failure(failure)
                except Exception as exc:  # explaining must never leave the waiters waiting
                    reason = f"{self._label()} could not start: {failure!r} ({exc!r})"
                self.started.set_exception(McpServerError(self.name, reason))
                log.warning("mcp server failed to start", server=self.name, error=reason)
            if self._stderr is not None:
                self._stderr.close()
                self._stderr = None
            if self._temp is not None:
                remove_dir(Path(self._temp))  # (and its lock: ``tools/held_dirs.py``)

    async def _open(self, stack: AsyncExitStack) -> tuple[Any, Any]:
        config = self.server.config
        if isinstance(config, StdioServer):
            from mcp.client.stdio import StdioServerParameters, stdio_client

            # closed in serve's finally, after its tail is read for the error message
            self._stderr = tempfile.TemporaryFile(  # noqa: SIM115
                "w+", encoding="utf-8", errors="replace"
            )
            argv, env = self._held_server(config, stack)
            params = StdioServerParameters(
                command=argv[0], args=argv[1:], env=env, cwd=config.cwd or self.cwd
            )
            read, write = await stack.enter_async_context(stdio_client(params, errlog=self._stderr))
            return read, write
        assert isinstance(config, RemoteServer)
        import httpx2

        headers = dict(config.headers)
        if config.transport == "sse":
            from mcp.client.sse import sse_client

            read, write = await stack.enter_async_context(
                sse_client(config.url, headers=headers or None)
            )
            return read, write
        from mcp.client.streamable_http import streamable_http_client

        client = await stack.enter_async_context(
            httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=300.0))
        )
        read, write = await stack.enter_async_context(
            streamable_http_client(config.url, http_client=client)
        )
        return read, write

    def _held_server(
        self, config: StdioServer, stack: AsyncExitStack
    ) -> tuple[list[str], dict[str, str] | None]:
        """The server's command line and environment: in the run's sandbox (a temporary
        directory of its own), held by the reaper (``tools/held.py``), so that what the
        server starts ends with it, at its session's end or the runtime's death. The
        reaper's status pipe is named by a path (the SDK passes no descriptor:
        ``held.named_status``), closed after the transport (registered on ``stack`` first:
        it is left last). In a cluster's node host the
        reaper is detached (``tools/detached.py``): the SDK's process is its launcher's first
        process, ended at once, so the server's end at its session's is waited for here
        (``_end_held``)."""
        env = dict(config.env) or None
        if env is not None:
            env.pop(LEASE_VARIABLE, None)  # only this runtime's own line, below
        found = shutil.which(config.command, path=(env or {}).get("PATH"))
        if found is None and (self.sandbox is not None or os.sep not in config.command):
            raise FileNotFoundError(2, "not found", config.command)  # said plainly
        status = named_status()
        # in a node host not the runtime's child (``tools/detached.py``): a kill of the host's
        # children (Ray's) must not take the reaper and leave the server's daemons
        detach = ["--detach"] if detaches() else []
        reap: list[str] = []
        if status is not None:
            stack.push_async_callback(_end_held, status, bool(detach), self)
            reap = ["--status-path", status.path, *detach]
            if self.lease_env:  # its reaper kills it at the line (``tools.lease_line``)
                env = {**(env or {}), **self.lease_env}
        if self.sandbox is None:  # a path with a '/' as given: from the server's directory
            program = config.command if os.sep in config.command else str(found)
            return held_argv([program, *config.args], Path(), None, reap), env
        self._temp = str(make_dir(MCP_DIR))  # covered for other processes (tools/scratch.py)
        argv = held_argv([config.command, *config.args], Path(self._temp), self.sandbox, reap)
        return argv, {"TMPDIR": self._temp, **(env or {})}  # SandboxRefused: not started

    async def _list_tools(self, session: Any) -> tuple[McpTool, ...]:
        from mcp.types import PaginatedRequestParams

        tools: list[McpTool] = []
        cursor: str | None = None
        for _ in range(_LIST_PAGES):
            params = PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await session.list_tools(params=params)
            for tool in page.tools:
                hints = tool.annotations
                read_only = bool(hints is not None and hints.read_only_hint)
                tools.append(
                    McpTool(
                        server=self.name,
                        tool=tool.name,
                        name=exposed_name(self.name, tool.name),
                        description=tool.description or f"{tool.name} (MCP server {self.name})",
                        input_schema=dict(tool.input_schema or {"type": "object"}),
                        read_only=read_only,
                        idempotent=read_only or bool(hints is not None and hints.idempotent_hint),
                    )
                )
            cursor = page.next_cursor
            if not cursor:
                break
        return tuple(tools)

    def stop(self, until: float | None = None) -> None:
        """End the session (on the loop's thread): the transport stops the server process;
        a detached one's end waited for until ``until`` at most (``time.monotonic``: the
        hub's close's end; ``_end_held``)."""
        self._stopping = True
        self._until = until
        if self._scope is not None:
            self._scope.cancel()

    # ---- calls --------------------------------------------------------------------------------

    async def call(self, tool: str, arguments: dict[str, Any], shown_as: str) -> Any:
        """``tools/call`` on the shared session; the SDK's ``CallToolResult``.

        ``McpServerError`` when the server is not running or its connection closes."""
        import anyio
        from mcp import MCPError
        from mcp.types import CONNECTION_CLOSED

        session = self._session
        if session is None:
            raise McpServerError(self.name, f"{self._label()} is not running: {self._why_not()}")
        try:
            return await session.call_tool(tool, arguments)
        except MCPError as exc:
            if exc.code != CONNECTION_CLOSED:
                raise
            raise self._died(f"the connection closed during {shown_as}") from None
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
            raise self._died(f"the connection broke during {shown_as}") from None

    async def resources(self, shown_as: str) -> list[Any]:
        """``resources/list``, every page (a server without resources: none); the SDK's
        ``Resource``s. Errors as for ``call``."""
        from mcp.types import PaginatedRequestParams

        found: list[Any] = []
        cursor: str | None = None
        for _ in range(_LIST_PAGES):
            params = PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await self._on_session(
                lambda s, p=params: s.list_resources(params=p), shown_as, none_if_unsupported=True
            )
            if page is None:
                break
            found.extend(page.resources)
            cursor = page.next_cursor
            if not cursor:
                break
        return found

    async def read_resource(self, uri: str, shown_as: str) -> Any:
        """``resources/read`` of ``uri``; the SDK's ``ReadResourceResult``."""
        return await self._on_session(lambda s: s.read_resource(uri), shown_as)

    async def _on_session(
        self, request: Any, shown_as: str, *, none_if_unsupported: bool = False
    ) -> Any:
        """``request(session)`` with ``call``'s errors: ``McpServerError`` when the server is
        not running or its connection closes; an ``MCPError`` of the server as it is (None
        for "method not found" with ``none_if_unsupported``)."""
        import anyio
        from mcp import MCPError
        from mcp.types import CONNECTION_CLOSED, METHOD_NOT_FOUND

        session = self._session
        if session is None:
            raise McpServerError(self.name, f"{self._label()} is not running: {self._why_not()}")
        try:
            return await request(session)
        except MCPError as exc:
            if none_if_unsupported and exc.code == METHOD_NOT_FOUND:
                return None
            if exc.code != CONNECTION_CLOSED:
                raise
            raise self._died(f"the connection closed during {shown_as}") from None
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
            raise self._died(f"the connection broke during {shown_as}") from None

    def _died(self, what: str) -> McpServerError:
        self._capture_stderr()
        if self._dead is None:
            self._dead = f"{what} (the server exited or crashed){self._stderr_note()}"
            log.warning("mcp server died", server=self.name, error=self._dead)
        if self._scope is not None:
            self._scope.cancel()  # the transport reaps the process
        return McpServerError(self.name, f"{self._label()} stopped answering: {self._dead}")

    # ---- explaining failures ------------------------------------------------------------------

    def _why_not(self) -> str:
        if self._dead is not None:
            return self._dead
        if self.started.done() and self.started.exception() is not None:
            return str(self.started.exception())
        if self._stopping:
            return "it was stopped (the runtime is closing)"
        return "it has not started"

    def _start_failure(self, exc: BaseException | None) -> str:
        leaf = _leaf(exc) if exc is not None else None
        if self._stopping:
            reason = "the runtime closed while it was starting"
        elif leaf is None:
            reason = (
                f"it did not finish starting (initialize and tools/list) within"
                f" {self.start_timeout:g} s"
            )
        elif isinstance(leaf, ImportError) and (leaf.name or "").split(".")[0] in _SDK:
            reason = "the mcp SDK is not installed (pip install 'subagents[mcp]')"
        elif isinstance(leaf, SandboxRefused):
            reason = str(leaf)
        elif isinstance(leaf, FileNotFoundError):
            reason = f"its command was not found: {leaf.filename or self.server.config.describe()}"
        elif isinstance(leaf, PermissionError):
            reason = f"its command cannot be run: {leaf}"
        elif _is_connection_closed(leaf):  # (stopped when it had not ended: it closed stdout)
            ended = "closed its output" if stopped_first(self._said or b"") else "exited"
            reason = f"it {ended} before answering initialize{self._end_note()}"
        else:
            reason = f"{type(leaf).__name__}: {leaf}"
        return f"{self._label()} could not start: {reason}{self._stderr_note()}"

    def _heard(self, said: bytes, ended: bool = True) -> None:
        """What its reaper said by the transport's end; ``ended``: false when a detached
        one had not ended by the hub's close's end (``stop``'s ``until``): said."""
        self._said = said
        if not ended:
            log.warning(
                "mcp server stopped at the close's end, not waited for",
                server=self.name,
                error=f"{self._label()} had not ended by the runtime's close's end: it was"
                " stopped (SIGTERM) and its lifeline closed; its processes end after the close",
            )

    def _end_note(self) -> str:
        """How the server ended, as its reaper said (`` (exit status 1)``, `` (killed by
        SIGKILL)``, `` (stopped by the runtime: killed by SIGTERM)`` when it had not ended by
        the transport's close), or that the reaper ended without saying (it was killed
        itself: a signal to the launcher, its PID namespace's end); empty where not held."""
        if self._said is None:
            return ""
        how = how_it_ended(self._said)
        if how is not None:
            return f" ({how})"
        return " (its launcher ended without saying how the server ended: killed itself)"

    def _capture_stderr(self) -> None:
        """Keep the end of the server's stderr (read without moving the shared offset)."""
        handle = self._stderr
        if handle is None:
            return
        try:
            handle.flush()
            fd = handle.fileno()
            size = os.fstat(fd).st_size
            start = max(0, size - STDERR_TAIL * 4)
            text = os.pread(fd, size - start, start).decode("utf-8", errors="replace")
        except (OSError, ValueError):
            return
        self._stderr_tail = text[-STDERR_TAIL:].strip()

    def _stderr_note(self) -> str:
        return f"; its stderr ends with:\n{self._stderr_tail}" if self._stderr_tail else ""


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside (possibly nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _is_connection_closed(exc: BaseException) -> bool:
    import anyio

    if isinstance(exc, anyio.ClosedResourceError | anyio.BrokenResourceError | anyio.EndOfStream):
        return True
    if "mcp" in sys.modules:
        from mcp import MCPError
        from mcp.types import CONNECTION_CLOSED

        return isinstance(exc, MCPError) and exc.code == CONNECTION_CLOSED
    return False


async def _end_held(status: NamedStatus, detached: bool, connection: ServerConnection) -> None:
    """After the transport: what the server's reaper said is kept (``_heard``: ``exit N``
    once the server ended; the SDK's process, its launcher, has ended, or was left after its
    kill); a detached server's reaper (not the SDK's process: its first one, which ended at
    once) is ended and waited for off the loop (``held.end_detached``: ``SESSION_END_S`` to
    end by itself, then stopped, by the hub's close's end at most; the runtime's own write
    end closed first: the wait is for every writer's end), what it said kept as well; then
    the status pipe is closed, the lifeline of a reaper still running, whatever happened to
    the wait."""
    try:
        if detached and status.write_end >= 0:
            os.close(status.write_end)
            status = dataclasses.replace(status, write_end=-1)
        if detached:
            import anyio

            with anyio.CancelScope(shield=True):  # bounded: end_detached's hang guards
                said, ended = await anyio.to_thread.run_sync(
                    end_detached, status.read_end, connection._until
                )
        else:
            said, ended = heard(status.read_end), True
        connection._heard(said, ended)
    finally:
        status.close()
