"""The console's connections: uvicorn's HTTP/1.1 protocol with the deadlines it lacks
(docs/console.md, "Limits"; the numbers are ``limits.Limits``).

Why: the console listens on a port, and whoever reaches it (another user of the machine, a
script gone wrong, with or without the token) can open connections and leave them there.
uvicorn's HTTP/1.1 protocol (h11) arms no timer until a first response is complete, and then
only for an idle keep-alive connection (which any byte cancels): a connection that sends
nothing, or its request head a byte at a time, is held forever. A response whose client reads
nothing waits forever for room to write, and ``transport.close()`` waits for the buffer to
drain as well, so even an application that gave up on it (sse-starlette's ``send_timeout``)
would keep the socket, its buffers and the stream's task. ``ConsoleProtocol`` is uvicorn's
protocol with the deadlines it lacks:

- a request head must be whole ``head_timeout_s`` after the connection opens (or after the
  previous response): else it is closed (with a 408 if part of a head came);
- a response that cannot write for ``stall_timeout_s`` (its client reads nothing) is reset
  (linger 0: a close would leave the unsent bytes in the kernel for as long as the client
  does not read them); the stream behind it sees the disconnect and ends;
- past ``connections`` open connections, a request is answered 503 saying so and naming the
  flag that raises it, instead of being served;
- at shutdown (Ctrl-C) a response that cannot write, or a request whose body is still
  coming, is reset at once, not waited for (uvicorn would wait its graceful timeout, then
  cancel it with an error on the terminal).

A request head is at most ``HEAD_BYTES`` (h11's limit: past it, 400 and closed). The bounds
on streams and request bodies are the application's (``app.Console``).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from typing import TYPE_CHECKING, Any, ClassVar

import h11
from uvicorn.protocols.http.flow_control import FlowControl
from uvicorn.protocols.http.h11_impl import H11Protocol

from subagents.console.limits import Limits

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send


_EXTENDED = (
    "connection_made",
    "connection_lost",
    "handle_events",
    "on_response_complete",
    "pause_writing",
    "resume_writing",
    "shutdown",
)
"""uvicorn's ``H11Protocol`` methods ``ConsoleProtocol`` extends."""

_READ = {"cycle", "conn", "loop", "transport"}
"""What ``ConsoleProtocol`` reads of the state ``H11Protocol.__init__`` sets."""


def uvicorn_problem(
    protocol: type = H11Protocol, connection: type = h11.Connection, flow: type = FlowControl
) -> str | None:
    """What the installed uvicorn (and its h11) lacks of what ``ConsoleProtocol`` builds on,
    None when nothing: ``ConsoleProtocol`` extends uvicorn's internal HTTP/1.1 protocol (no
    public API gives these deadlines), which a new 0.x release may change; ``serve`` then
    refuses to start, naming what changed, rather than fail on each connection."""
    missing = [
        f"H11Protocol.{name}" for name in _EXTENDED if not callable(getattr(protocol, name, None))
    ]
    init = getattr(protocol, "__init__", None)
    names = set(getattr(getattr(init, "__code__", None), "co_names", ()))
    missing += [f"H11Protocol's {name}" for name in sorted(_READ - names)]
    if not hasattr(connection, "trailing_data"):
        missing.append("h11.Connection.trailing_data")
    flow_init = getattr(flow, "__init__", None)
    if "write_paused" not in getattr(getattr(flow_init, "__code__", None), "co_names", ()):
        missing.append("FlowControl's write_paused")
    return ", ".join(missing) or None


def protocol_for(limits: Limits) -> type[ConsoleProtocol]:
    """The protocol class uvicorn makes each connection with (``Config(http=...)``)."""
    return type("ConsoleProtocol", (ConsoleProtocol,), {"limits": limits})


class ConsoleProtocol(H11Protocol):
    """uvicorn's HTTP/1.1 protocol with the deadlines and the bound of the module docstring."""

    limits: ClassVar[Limits] = Limits()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.head_deadline: asyncio.TimerHandle | None = None
        self.stall_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.limits.connections:
            self.app = _too_many_connections(self.limits.connections)
        self._await_head()

    def connection_lost(self, exc: Exception | None) -> None:
        for timer in (self.head_deadline, self.stall_deadline):
            if timer is not None:
                timer.cancel()
        super().connection_lost(exc)

    def handle_events(self) -> None:
        super().handle_events()
        answering = self.cycle is not None and not self.cycle.response_complete
        if answering and self.head_deadline is not None:
            self.head_deadline.cancel()  # a request's head came whole: it is being answered
            self.head_deadline = None

    def on_response_complete(self) -> None:
        if not self.transport.is_closing():
            self._await_head()  # the next request's head (a pipelined one cancels it at once)
        super().on_response_complete()

    def _await_head(self) -> None:
        if self.head_deadline is not None:
            self.head_deadline.cancel()
        self.head_deadline = self.loop.call_later(self.limits.head_timeout_s, self._head_late)

    def _head_late(self) -> None:
        self.head_deadline = None
        if self.transport.is_closing():
            return
        if self.conn.trailing_data[0]:  # part of a head came: say why it ends
            text = f"the request's head did not come whole within {self.limits.head_timeout_s:g} s"
            self.transport.write(_plain(408, "Request Timeout", text))
        self.transport.close()

    def pause_writing(self) -> None:
        super().pause_writing()
        if self.stall_deadline is None:
            self.stall_deadline = self.loop.call_later(self.limits.stall_timeout_s, self._stalled)

    def resume_writing(self) -> None:
        super().resume_writing()
        if self.stall_deadline is not None:
            self.stall_deadline.cancel()
            self.stall_deadline = None

    def _stalled(self) -> None:
        self.stall_deadline = None
        self._reset()

    def _reset(self) -> None:
        """Drop the connection now, and what waits to be written to it: a reset (linger 0),
        not a close, which would keep the unsent bytes in the kernel (and the client's
        side open) for as long as the client does not read them."""
        sock = self.transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.transport.abort()

    def shutdown(self) -> None:
        cycle = self.cycle
        receiving = cycle is not None and cycle.more_body and not cycle.response_started
        if self.flow.write_paused or receiving:  # a client reading nothing, or a body still
            self._reset()  # coming (for up to body_timeout_s): either would hold the exit
            return
        super().shutdown()


def _plain(status: int, reason: str, text: str) -> bytes:
    body = (text + "\n").encode()
    return (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: text/plain; charset=utf-8\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n"
        "x-content-type-options: nosniff\r\ncache-control: no-store\r\n\r\n"
    ).encode() + body


def _too_many_connections(limit: int) -> ASGIApp:
    """What a connection past the bound is answered, whatever it asks."""
    text = (
        f"this console has more than {limit} open connections: close some, or start"
        " `subagents serve --max-connections N` with a larger N"
    )
    body = (text + "\n").encode()

    async def refuse(scope: Scope, _receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        await send(
            {
                "type": "http.response.start",
                "status": 503,
                "headers": [
                    (b"content-type", b"text/plain; charset=utf-8"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                    (b"x-content-type-options", b"nosniff"),
                    (b"cache-control", b"no-store"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    return refuse
