"""A real TCP proxy that cuts a connection at a transaction's ``COMMIT``: the lost answer.

Why: a client whose connection dies after it sent ``COMMIT`` and before the answer came does
not know whether the server committed; killing the server (``pg_ctl stop``) cannot pick that
moment, and a mock of the connection tests nothing of libpq's. The proxy sits between the
store and the session's PostgreSQL server (two threads per connection, plain sockets) and
forwards both ways; armed with a marker, it cuts the first connection whose client sends the
marker and then a ``COMMIT``:

- ``applied``: it forwards the ``COMMIT`` and cuts at the server's answer to it
  (``CommandComplete`` ``COMMIT``), which the client never gets: the server committed;
- else it cuts before forwarding the ``COMMIT``: the server rolls the transaction back.

- ``late``: it cuts the client's side before forwarding, and holds the transaction's last
  statements and its ``COMMIT`` with the server's side open (the server keeps the
  transaction open, idle) until ``release()``: then it forwards them, as a ``COMMIT`` still
  on its way when the client gave up, and notes the server's answer (``landed`` is set,
  ``answer`` is ``"committed"`` or the server's error), which nobody is there to read.

Either way the client sees the connection closed with its ``COMMIT`` sent. ``cut`` is set
once it happened; every connection after it is forwarded untouched.
"""

from __future__ import annotations

import contextlib
import re
import socket
import threading

_COMMIT = b"COMMIT\x00"
"""The statement as the extended protocol carries it (``Parse``), and the server's
``CommandComplete`` tag for it."""


class CommitCutter:
    """The proxy, listening on ``port`` of 127.0.0.1, forwarding to ``target``."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._marker: bytes | None = None
        self._applied = False
        self._late = False
        self._release = threading.Event()
        self.landed = threading.Event()
        self.answer: str | None = None
        """What the server answered a late ``COMMIT`` (``late``), once ``landed``."""
        self.cut = threading.Event()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True, name="commit-cutter").start()

    def url(self, server_url: str) -> str:
        """``server_url`` (``...@127.0.0.1:PORT/db``) through the proxy."""
        host_port = f"127.0.0.1:{self.target[1]}"
        assert host_port in server_url, server_url
        return server_url.replace(host_port, f"127.0.0.1:{self.port}")

    def arm(self, marker: bytes, *, applied: bool = False, late: bool = False) -> None:
        with self._lock:
            self._marker, self._applied, self._late = marker, applied, late

    def release(self) -> None:
        """A ``late`` transaction's rest and ``COMMIT`` go to the server now."""
        self._release.set()

    def close(self) -> None:
        self._closed = True
        self._listener.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            _Link(self, client, server).start()

    def _take(self) -> tuple[bytes, bool, bool] | None:
        """The marker to watch for on a connection (once cut: none)."""
        with self._lock:
            if self._marker is None or self.cut.is_set():
                return None
            return self._marker, self._applied, self._late


class _Link:
    """One client connection and its server connection."""

    def __init__(self, proxy: CommitCutter, client: socket.socket, server: socket.socket) -> None:
        self.proxy, self.client, self.server = proxy, client, server
        self.sent = bytearray()  # what the client sent since the proxy was armed
        self.committing = False  # the marked transaction's COMMIT went to the server
        self.late = False  # the client is gone; the server gets the COMMIT on release
        self.held = bytearray()  # (late) what the client sent from the marker on
        self.dead = False

    def start(self) -> None:
        threading.Thread(target=self._up, daemon=True).start()
        threading.Thread(target=self._down, daemon=True).start()

    def _kill(self) -> None:
        self.proxy.cut.set()
        self._close()

    def _close(self) -> None:
        self.dead = True
        for sock in (self.client, self.server):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _up(self) -> None:
        """Client to server; the marked ``COMMIT`` cut before it goes, or noted."""
        while not self.dead:
            try:
                chunk = self.client.recv(65536)
            except OSError:
                break
            if not chunk:
                break
            armed = self.proxy._take()
            if armed is not None and not self.committing:
                marker, applied, late = armed
                self.sent += chunk
                at = self.sent.find(marker)
                if late and at >= 0:  # from the marker on, nothing goes before the release
                    self.held += chunk
                    if self.sent.find(_COMMIT, at) >= 0:
                        self._hold()
                        return
                    continue
                if at >= 0 and self.sent.find(_COMMIT, at) >= 0:
                    if not applied:
                        self._kill()
                        return
                    self.committing = True
            try:
                self.server.sendall(chunk)
            except OSError:
                break
        self._end()

    def _hold(self) -> None:
        """``late``: the client's side cut now, what it sent from the marker on (the rest of
        the transaction and its ``COMMIT``, which the client sends without waiting for
        answers: one pipeline) sent to the server once released; ``_down`` reads its
        answer."""
        self.late = True
        self.proxy.cut.set()  # (before the client can connect again: that link is not armed)
        with contextlib.suppress(OSError):
            self.client.shutdown(socket.SHUT_RDWR)
        self.client.close()
        self.proxy._release.wait()
        try:
            self.server.sendall(self.held)
        except OSError as exc:
            self.proxy.answer = f"not sent: {exc}"
            self.proxy.landed.set()
            self._close()

    def _down(self) -> None:
        """Server to client; the answer to the marked ``COMMIT`` never delivered."""
        answer = bytearray()
        while not self.dead:
            try:
                chunk = self.server.recv(65536)
            except OSError:
                break
            if not chunk:
                break
            if self.late:  # nobody to deliver it to: what the server said is noted
                answer += chunk
                said = _answer_of(bytes(answer))
                if said is not None:
                    self.proxy.answer = said
                    self.proxy.landed.set()
                    self._close()
                    return
                continue
            if self.committing and _COMMIT in chunk:
                self._kill()
                return
            try:
                self.client.sendall(chunk)
            except OSError:
                break
        self._end()

    def _end(self) -> None:
        if not self.dead:
            self._close()


def _answer_of(stream: bytes) -> str | None:
    """What the server's messages in ``stream`` say of a transaction's end: ``committed``
    (the ``CommandComplete`` of its ``COMMIT``), the message of its first error
    (``ErrorResponse``), or None while neither has come. Found by their bytes, not read
    message by message: ``stream`` may begin inside the answer to a statement forwarded
    before the hold."""
    if _COMMIT_DONE in stream:
        return "committed"
    found = _ERROR.search(stream)
    if found is None:
        return None
    length = int.from_bytes(found.group(1), "big")
    body = stream[found.start() + 5 : found.start() + 1 + length]
    if len(body) < length - 4:
        return None  # (the rest of it is still on its way)
    fields = {f[:1]: f[1:] for f in body.split(b"\x00") if f}
    return fields.get(b"M", b"an error").decode(errors="replace")


_COMMIT_DONE = b"C" + (4 + len(_COMMIT)).to_bytes(4, "big") + _COMMIT
"""The server's ``CommandComplete`` of a ``COMMIT``."""

_ERROR = re.compile(rb"E(.{4})SERROR\x00", re.DOTALL)
"""The start of an ``ErrorResponse`` (its length, then its severity field)."""
