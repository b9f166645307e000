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
- the owner's connections (one of their requests showed the token) and strangers' are
  counted apart (``admission.Admission``): past ``connections`` of the owner's, the owner's
  request is answered 503 saying so and naming the flag that raises it; past ``strangers``
  of strangers', a new connection closes a stranger's that had its chance to send a request
  (nothing of one waiting to be read, none being answered); a stranger's request is
  answered (the guard's 401, 403) and its connection closed;
- at shutdown (Ctrl-C) a response that cannot write, or a request whose body is still
  coming, is reset at once, not waited for (uvicorn would wait its graceful timeout, then
  cancel it with an error on the terminal).

A request head is at most ``HEAD_BYTES`` (h11's limit: past it, 400 and closed). The bounds
on streams and request bodies are the application's (``app.Console``).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import socket
import struct
import termios
from typing import TYPE_CHECKING, Any, ClassVar

import h11
from uvicorn.protocols.http.flow_control import FlowControl
from uvicorn.protocols.http.h11_impl import H11Protocol

from subagents.console.admission import Admission
from subagents.console.limits import Limits

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from subagents.console.guard import Guard


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

_READ = {"app", "cycle", "conn", "loop", "transport"}
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


def protocol_for(limits: Limits, guard: Guard) -> type[ConsoleProtocol]:
    """The protocol class uvicorn makes each connection of one server with (``Config(http=
    ...)``): ``guard`` says whether a request shows the token (``Guard.holds_token``)."""
    admission: Admission[ConsoleProtocol] = Admission(
        owners=limits.connections, strangers=limits.strangers
    )
    return type(
        "ConsoleProtocol",
        (ConsoleProtocol,),
        {"limits": limits, "admission": admission, "guard": guard},
    )


class ConsoleProtocol(H11Protocol):
    """uvicorn's HTTP/1.1 protocol with the deadlines and the bound of the module docstring."""

    limits: ClassVar[Limits] = Limits()
    admission: ClassVar[Admission[ConsoleProtocol]]
    guard: ClassVar[Guard]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.head_deadline: asyncio.TimerHandle | None = None
        self.stall_deadline: asyncio.TimerHandle | None = None
        self.served: ASGIApp = self.app
        self.app = self._admitted
        self.had_chance = False
        """Whether the loop has looked for this connection's bytes at least once."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.admission.opened(self, self.client[0] if self.client else "")
        self._make_room()
        # its reader is added after this call; the loop's next look for bytes is the turn
        # after the next: then this connection has had its chance to send a request
        self.loop.call_soon(self.loop.call_soon, self._given_chance)
        self._await_head()

    def _given_chance(self) -> None:
        self.had_chance = True
        self._make_room()

    def connection_lost(self, exc: Exception | None) -> None:
        self.admission.closed(self)
        for timer in (self.head_deadline, self.stall_deadline):
            if timer is not None:
                timer.cancel()
        super().connection_lost(exc)

    def _may_close(self) -> bool:
        """Whether this stranger's connection had its chance: nothing of a request waits to be
        read (the kernel's buffer: a request that came with the connection, not read yet),
        none is being answered, and the loop has looked for its bytes since it was made."""
        if not self.had_chance or self.transport.is_closing():
            return False
        if self.cycle is not None and not self.cycle.response_complete:
            return False
        sock = self.transport.get_extra_info("socket")
        if sock is None:
            return True
        try:
            unread = fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0\0\0\0")
        except OSError:
            return True
        return int(struct.unpack("i", unread)[0]) == 0

    async def _admitted(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Each request: the owner's (the token shown) served in one of the owner's slots, or
        503 when they are all taken; a stranger's answered by the guard and then closed."""
        if scope["type"] != "http":
            await self.served(scope, receive, send)
        elif not self.guard.holds_token(scope):
            await self.served(scope, receive, _closing(send))
        elif self.admission.shows_token(self):
            await self.served(scope, receive, send)
        else:
            await _too_many_connections(self.limits.connections)(scope, receive, send)

    def _make_room(self) -> None:
        """Close strangers' connections that had their chance while they are too many."""
        while (crowding := self.admission.to_close(lambda conn: conn._may_close())) is not None:
            self.admission.closed(crowding)
            crowding.transport.close()

    def handle_events(self) -> None:
        super().handle_events()
        self._make_room()  # bytes were read: a connection may have had its chance now
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


def _closing(send: Send) -> Send:
    """``send`` answering with ``connection: close``: h11 then closes the connection once the
    answer is written."""

    async def closing(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {
                **message,
                "headers": [*message.get("headers", ()), (b"connection", b"close")],
            }
        await send(message)

    return closing


def _too_many_connections(limit: int) -> ASGIApp:
    """What the owner's request is answered past the bound on the owner's connections."""
    text = (
        f"this console has {limit} open connections of pages and scripts with the token: close"
        " some, or start `subagents serve --max-connections N` with a larger N"
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
