"""Opening a link (``cluster.link``): the node host's gate, which lets only its driver in,
and the driver's dial.

The node host listens on a TCP port that anything on the network may reach: a port
scanner, a load balancer's health probe, another program with a wrong key. Its driver must
still get in, so the gate accepts connections until one has passed the handshake (TLS when
configured, ``cluster.link_tls``; then the HMAC challenge both ways on the set-up's key),
each connection's handshake on a thread of its own and under a deadline (``HANDSHAKE_S``):
a stranger that says nothing, or the wrong thing, is dropped and logged with its address
(warning), and never holds up the driver. The first connection to pass is the link; the
listening socket closes then (one connection per set-up).

``SocketConnection`` is ``multiprocessing.connection.Connection`` (length-prefixed frames,
``send_bytes``/``recv_bytes``/``poll``, what the HMAC handshake speaks) over a socket
object instead of a bare descriptor, so that a deadline holds during the handshake and the
bytes may go through TLS.
"""

from __future__ import annotations

import contextlib
import io
import math
import select
import socket
import ssl
import threading
import time
from multiprocessing import AuthenticationError
from multiprocessing.connection import (
    Connection,
    answer_challenge,
    deliver_challenge,
)
from typing import Any, Protocol

from subagents.cluster.link_tls import CHUNK, LinkTls, TlsChannel
from subagents.logs import get_logger

log = get_logger("subagents.cluster")

HANDSHAKE_S = 10.0
"""How long a connection has to pass the handshake (TLS and the key) before it is dropped."""
MOST_HANDSHAKES = 32
"""Handshakes under way at once. A connection beyond them makes room by ending the oldest
one still under way: a flood of idle connections cannot keep the driver out, since the
driver's handshake takes one round trip and a flood's are the oldest ones waiting."""


class Channel(Protocol):
    sock: socket.socket

    def sendall(self, data: bytes | memoryview) -> None: ...

    def recv(self, size: int, deadline: float | None = None) -> bytes: ...

    def pending(self) -> bool: ...


class PlainChannel:
    """A connected socket as it is."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    def sendall(self, data: bytes | memoryview) -> None:
        self.sock.sendall(data)

    def recv(self, size: int, deadline: float | None = None) -> bytes:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("timed out")
            self.sock.settimeout(left)
        return self.sock.recv(min(size, CHUNK))

    def pending(self) -> bool:
        return False


class SocketConnection(Connection):
    """A ``Connection`` over a ``Channel`` (see the module). ``deadline`` (monotonic), while
    set, bounds every read: the handshake's."""

    def __init__(self, channel: Channel) -> None:
        super().__init__(channel.sock.fileno())
        self.channel = channel
        self.deadline: float | None = None
        self._poller = select.poll()
        """Made once: ``multiprocessing.connection.wait`` makes a selector at every call,
        and the driver's reader polls before each frame it reads (``LinkEnd.receive``)."""
        self._poller.register(channel.sock.fileno(), select.POLLIN)

    def _send(self, buf: Any, write: Any = None) -> None:
        self.channel.sendall(buf)

    def _recv(self, size: int, read: Any = None) -> io.BytesIO:
        buf = io.BytesIO()
        remaining = size
        while remaining > 0:
            chunk = self.channel.recv(remaining, self.deadline)
            if not chunk:
                if remaining == size:
                    raise EOFError
                raise OSError("got end of file during message")
            buf.write(chunk)
            remaining -= len(chunk)
        return buf

    def _poll(self, timeout: float | None) -> bool:
        """Whether a read would not wait (a frame, the end of the stream, an error: ``POLLHUP``
        and ``POLLERR`` come whatever was asked, and the read then says which)."""
        if self.channel.pending():
            return True
        wait_ms = None if timeout is None else max(0, math.ceil(timeout * 1000))
        return bool(self._poller.poll(wait_ms))

    def _close(self, _close: Any = None) -> None:
        self.channel.sock.close()

    def settled(self) -> None:
        """The handshake is over: reads wait as long as it takes from now on."""
        self.deadline = None
        self.channel.sock.settimeout(None)


def _open(
    sock: socket.socket, authkey: bytes, tls: ssl.SSLContext | None, *, server: bool, s: float
) -> SocketConnection:
    """``sock``'s handshake within ``s`` seconds: TLS when ``tls``, then the key both ways
    (the node delivers its challenge first, as ``multiprocessing``'s listener does)."""
    deadline = time.monotonic() + s
    channel: Channel = PlainChannel(sock)
    if tls is not None:
        channel = TlsChannel(sock, tls, server=server)
        channel.handshake(deadline)
    conn = SocketConnection(channel)
    conn.deadline = deadline
    if server:
        deliver_challenge(conn, authkey)
        answer_challenge(conn, authkey)
    else:
        answer_challenge(conn, authkey)
        deliver_challenge(conn, authkey)
    conn.settled()
    return conn


def dial(
    address: tuple[str, int], authkey: bytes, tls: LinkTls | None, *, connect_s: float, s: float
) -> SocketConnection:
    """The driver's side: connect to ``address`` (``OSError`` when nobody answers within
    ``connect_s``), then the handshake within ``s`` seconds (``HandshakeError`` saying why
    it failed)."""
    context = tls.client_context() if tls is not None else None
    sock = socket.create_connection(address, timeout=connect_s)
    try:
        return _open(sock, authkey, context, server=False, s=s)
    except BaseException as exc:
        sock.close()
        raise HandshakeError(_why(exc, tls is not None)) from exc


class HandshakeError(ConnectionError):
    """A connection did not pass the link's handshake; the message says why."""


def _why(exc: BaseException, tls: bool) -> str:
    """What a failed handshake means, for people."""
    if isinstance(exc, TimeoutError):
        return "no answer to the handshake in time"
    if isinstance(exc, AuthenticationError):
        return f"wrong key ({exc})"
    if isinstance(exc, ssl.SSLError):
        return f"TLS refused ({exc.reason or exc})"
    if isinstance(exc, EOFError | ConnectionError):
        hint = "" if tls else "; so ends a link with TLS on one end only (SUBAGENTS_LINK_TLS_*)"
        return f"closed during the handshake{hint}"
    return f"not the link's handshake ({type(exc).__name__}: {exc})"


class Gate:
    """The node host's listening socket, until its driver got in (see the module).

    ``wait`` blocks until a connection passed the handshake (that connection) or the gate
    was closed (None); ``strangers`` counts the connections dropped."""

    def __init__(
        self,
        listener: socket.socket,
        authkey: bytes,
        tls: LinkTls | None = None,
        *,
        handshake_s: float = HANDSHAKE_S,
    ) -> None:
        self._listener = listener
        self.address: tuple[str, int] = listener.getsockname()[:2]
        self._authkey = authkey
        self._tls = tls.server_context() if tls is not None else None
        self._handshake_s = handshake_s
        self._lock = threading.Lock()
        self._peer: SocketConnection | None = None
        self._closed = False
        self._under_way: dict[int, socket.socket] = {}
        """The sockets whose handshake is under way, oldest first (by ``id``)."""
        self.strangers = 0
        self._wake_r, self._wake_w = socket.socketpair()

    def wait(self) -> SocketConnection | None:
        try:
            while True:
                ready, _, _ = select.select([self._listener, self._wake_r], [], [])
                with self._lock:
                    if self._peer is not None or self._closed:
                        return self._peer if not self._closed else None
                if self._listener in ready:
                    self._accept()
        finally:
            for sock in (self._listener, self._wake_r, self._wake_w):
                with contextlib.suppress(OSError):
                    sock.close()

    def _accept(self) -> None:
        try:
            sock, address = self._listener.accept()
        except OSError:
            return
        with self._lock:
            oldest = next(iter(self._under_way.values())) if self._under_way else None
            if len(self._under_way) < MOST_HANDSHAKES:
                oldest = None
            self._under_way[id(sock)] = sock
        if oldest is not None:  # its handshake thread wakes, fails and says why
            with contextlib.suppress(OSError):
                oldest.shutdown(socket.SHUT_RDWR)
        threading.Thread(
            target=self._handshake, args=(sock, address), name="subagents-link-gate", daemon=True
        ).start()

    def _handshake(self, sock: socket.socket, address: Any) -> None:
        try:
            conn = _open(sock, self._authkey, self._tls, server=True, s=self._handshake_s)
        except BaseException as exc:  # said before the close: the stranger sees it after
            self._stranger(address, _why(exc, self._tls is not None))
            sock.close()
            return
        finally:
            with self._lock:
                self._under_way.pop(id(sock), None)
        with self._lock:
            taken = self._peer is not None or self._closed
            if not taken:
                self._peer = conn
        if taken:  # the link is made (or the gate closed): one connection per set-up
            conn.close()
            return
        self._wake()

    def _stranger(self, address: Any, reason: str) -> None:
        self.strangers += 1
        where = f"{address[0]}:{address[1]}" if isinstance(address, tuple) else str(address)
        log.warning(
            "a connection to the node host's link was dropped",
            peer=where,
            reason=reason,
            link=f"{self.address[0]}:{self.address[1]}",
        )

    def close(self) -> None:
        """Stop waiting (``wait`` returns None); a connection that gets in after is closed."""
        with self._lock:
            self._closed = True
            peer, self._peer = self._peer, None
        if peer is not None:
            peer.close()
        self._wake()

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
