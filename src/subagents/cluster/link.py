"""The link between a runtime's supervisor (in the driver) and one node host: one socket.

Why a socket and not Ray calls: the runtime's traffic with a node is one ordered stream of
small batches each way (the supervisor's effects for the node's runs; what the runs tell
and ask the supervisor), and every spawn on another node crosses it four times. Measured on
this machine at idle: a Ray actor call's round trip p50 1.5 ms (an async actor; 0.9 ms a
threaded one), a message over a connected socket 0.044 ms. A spawn on the other node took
7.5 ms p50 over Ray calls, most of it in them (docs/cluster.md "What it costs").

Ray stays the engine for everything else: it places the node hosts (one per node), restarts
them, sets them up (the kit, and the address and key of this link, through its own
authenticated calls), reports their deaths, and serves the store. This module only carries
the runtime's own message stream between two processes Ray placed, with the standard
library's ``multiprocessing.connection`` (length-prefixed frames, an HMAC handshake on a
random key per set-up), over TLS when the user gives certificates (``cluster.link_tls``). A
node host lets in only the connection that passes that handshake, whatever else connects
first (``cluster.link_gate``).

Frames, each one as msgpack of its direction's type, or pickled when msgpack would not give
it back as it was (``wire.Frames``: ``TO_NODE``, ``TO_DRIVER``):
- driver -> node: ``(EFFECTS, seq, [Effect, ...])``, ``(ANSWERS, 0, [Answer, ...])`` and
  ``(DEFINITIONS, version, [AgentSpec, ...])`` (the runtime's definitions after a reload:
  in order with the effects, so every start decided after a reload finds them there);
- node -> driver: ``[Told | Asked, ...]``, everything queued meanwhile in one frame.

A connection belongs to one set-up of one host process: a frame can never reach a later
incarnation (the old connection died with its process), and TCP keeps each direction in
order, so mail stays ordered per sender. When a connection drops while its host still runs
(the network, not the process), frames may have been lost in flight: the driver then kills
that host (``ClusterHosting``), and its runs start again elsewhere from the store, as after
any host's death: nothing is applied twice or half.
"""

from __future__ import annotations

import contextlib
import queue
import socket
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from subagents.actors.remote import Answer, Asked, Told
from subagents.cluster.link_gate import HANDSHAKE_S, Gate, HandshakeError, dial
from subagents.cluster.link_tls import LinkTls
from subagents.cluster.wire import Frames
from subagents.supervision.effects import StartRun, StopAgent, Tell

EFFECTS = "effects"
ANSWERS = "answers"
DEFINITIONS = "definitions"
LINK_PORTS_ENV = "SUBAGENTS_LINK_PORTS"
"""Where node hosts listen for their link: ``LOW-HIGH`` (or one port), read where the
runtime starts and handed to every node host; unset: any free (ephemeral) port."""

BEAT_S = 1.0
"""A node sends at least one frame this often (an empty one when it has nothing to say)."""
SILENT_S = 30.0
"""A link silent this long (no frame, not even a beat) is taken as lost: its host is fenced
and its runs start again elsewhere (about when Ray itself declares a silent node dead)."""

TO_NODE = Frames(tuple[str, int, list[StartRun | Tell | StopAgent | Answer]])
"""The driver's frames (a ``DEFINITIONS`` frame, whose specs are not of this type, pickled)."""
TO_DRIVER = Frames(list[Told | Asked])
"""A node's frames."""
UNTYPED = Frames()
"""Frames pickled whole, either way (a link whose two ends are not a driver and a node)."""

OUTBOX_MOST = 2000
"""Most items the node sends in one frame."""
CONNECT_TIMEOUT_S = 20.0


class LinkError(ConnectionError):
    """The link could not be made, or broke; the message says where and why."""


def link_ports(raw: str | None) -> tuple[int, int] | None:
    """The ports a node host may listen on, from ``$SUBAGENTS_LINK_PORTS`` (``raw``):
    ``(low, high)``, both included; None when unset. A ``ValueError`` naming the variable
    for anything but ``PORT`` or ``LOW-HIGH`` within 1-65535."""
    if raw is None or not raw.strip():
        return None
    low, _, high = raw.strip().partition("-")
    try:
        ports = (int(low), int(high or low))
    except ValueError:
        ports = (0, 0)
    if not 1 <= ports[0] <= ports[1] <= 65535:
        raise ValueError(
            f"{LINK_PORTS_ENV} must be a port or a range LOW-HIGH within 1-65535, got {raw!r}"
        )
    return ports


def _listen(host: str, ports: tuple[int, int] | None) -> socket.socket:
    """A listening socket on ``host``: on a free port of ``ports`` (the first free one), else
    on any free port; a ``LinkError`` naming the range when every port of it is taken."""
    if ports is None:
        return socket.create_server((host, 0))
    for port in range(ports[0], ports[1] + 1):
        try:
            return socket.create_server((host, port))
        except OSError:  # taken (another runtime's node host, another program)
            continue
    raise LinkError(
        f"no free port for the link on {host} in {LINK_PORTS_ENV}={ports[0]}-{ports[1]}:"
        " widen it (a node host holds a port of it only until its driver has connected)"
    )


class LinkEnd:
    """One end of a connected link: frames sent whole, in order, and received.

    ``queued=True`` (the driver's end): ``send`` only queues the frame, and a thread of the
    link writes the queue to the socket. The driver's senders (the supervisor's thread, the
    registry's) then never wait on a node: a node that stops reading (frozen, cut off by the
    network, its socket's buffer full) holds up only its own link, never the supervisor. A
    write that fails closes the link, so its reader hears of it."""

    def __init__(
        self,
        conn: Connection,
        peer: str,
        *,
        queued: bool = False,
        sends: Frames = UNTYPED,
        receives: Frames = UNTYPED,
    ) -> None:
        """``sends``, ``receives``: the frames of each direction (``TO_NODE``, ``TO_DRIVER``)."""
        self.conn = conn
        self.peer = peer
        self._pack = sends.pack
        self._unpack = receives.unpack
        self._sending = threading.Lock()
        self._closed = False
        self._queue: queue.SimpleQueue[bytes | None] | None = None
        self._writer: threading.Thread | None = None
        if queued:
            self._queue = queue.SimpleQueue()
            self._writer = threading.Thread(
                target=self._write, name="subagents-link-out", daemon=True
            )
            self._writer.start()

    def send(self, frame: Any) -> None:
        data = self._pack(frame)
        if self._queue is not None:
            if self._closed:
                raise LinkError(f"the link to {self.peer} is closed")
            self._queue.put(data)
            return
        self._send_bytes(data)

    def _send_bytes(self, data: bytes) -> None:
        with self._sending:
            try:
                self.conn.send_bytes(data)
            except (OSError, ValueError) as exc:
                raise LinkError(f"the link to {self.peer} broke: {exc}") from exc

    def _write(self) -> None:
        assert self._queue is not None
        while True:
            data = self._queue.get()
            if data is None:  # closed
                return
            try:
                self._send_bytes(data)
            except LinkError:
                self.close()  # its reader hears of it: the link's loss is handled there
                return

    def receive(self, timeout: float | None = None) -> Any:
        """The next frame; None when ``timeout`` (seconds) passed without one."""
        try:
            if timeout is not None and not self.conn.poll(timeout):
                return None
            return self._unpack(self.conn.recv_bytes())
        except (EOFError, OSError, ValueError) as exc:
            why = str(exc) or "end of stream"
            raise LinkError(f"the link to {self.peer} closed: {why}") from exc

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Close it, waking a thread blocked in ``receive`` (a plain close of the descriptor
        would not wake it on Linux; shutting the socket down does)."""
        if self._closed:
            return
        self._closed = True
        if self._queue is not None:
            self._queue.put(None)  # the writer ends
        with contextlib.suppress(OSError, ValueError):
            shut = socket.fromfd(self.conn.fileno(), socket.AF_INET, socket.SOCK_STREAM)
            with contextlib.suppress(OSError):
                shut.shutdown(socket.SHUT_RDWR)
            shut.close()
        with contextlib.suppress(OSError):
            self.conn.close()
        writer = self._writer
        if writer is not None and writer is not threading.current_thread():
            # it ends at the None queued above (a write under way fails on the shut socket):
            # a closed link leaves no thread behind (a runtime's close found it still alive)
            writer.join(timeout=5.0)


def connect(
    address: tuple[str, int],
    authkey: bytes,
    peer: str,
    tls: LinkTls | None = None,
    *,
    handshake_s: float = HANDSHAKE_S,
) -> LinkEnd:
    """The driver's end of the link to the node host listening on ``address`` (over TLS
    when ``tls``: ``cluster.link_tls``); a ``LinkError`` naming the address when it cannot
    be reached, or refuses the key or the TLS (``cluster.link_gate``)."""
    try:
        conn = dial(address, authkey, tls, connect_s=CONNECT_TIMEOUT_S, s=handshake_s)
    except HandshakeError as exc:
        raise LinkError(f"{peer} at {address[0]}:{address[1]} refused the link: {exc}") from exc
    except OSError as exc:
        raise LinkError(
            f"cannot reach {peer} at {address[0]}:{address[1]} ({exc}); the runtime's driver"
            " must reach every node of the cluster on the link's TCP ports: ephemeral ones, as"
            f" Ray's own workers use, or the range in ${LINK_PORTS_ENV} (docs/cluster.md)"
        ) from exc
    _no_delay(conn)
    _keep_alive(conn)
    return LinkEnd(conn, peer, queued=True, sends=TO_NODE, receives=TO_DRIVER)


class NodeLink:
    """A node host's end: listens until its driver got in (``cluster.link_gate``: strangers
    are dropped and logged; TLS when ``tls``), then applies the effects it sends
    (``deliver(seq, effects)``), its answers (``answer(answers)``) and definitions
    (``definitions(version, specs)``) in order, and sends what ``take(most, timeout)`` gives
    (the node's outbox) as it is queued."""

    def __init__(
        self,
        host: str,
        authkey: bytes,
        *,
        deliver: Callable[[int, list[Any]], None],
        answer: Callable[[list[Any]], None],
        take: Callable[[int, float], list[Any]],
        definitions: Callable[[int, list[Any]], None] = lambda _version, _specs: None,
        ports: tuple[int, int] | None = None,
        tls: LinkTls | None = None,
        handshake_s: float = HANDSHAKE_S,
    ) -> None:
        listener = _listen(host, ports)
        try:
            self._gate = Gate(listener, authkey, tls, handshake_s=handshake_s)
        except BaseException:
            listener.close()
            raise
        self.address: tuple[str, int] = self._gate.address
        self.tls = tls is not None
        self._deliver = deliver
        self._answer = answer
        self._take = take
        self._definitions = definitions
        self._end: LinkEnd | None = None
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="subagents-link", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        conn = self._gate.wait()  # closes the listening socket: one connection per set-up
        if conn is None:  # closed before the driver came: nothing to serve
            return
        _no_delay(conn)
        self._end = end = LinkEnd(conn, "the driver", sends=TO_DRIVER, receives=TO_NODE)
        if self._closed.is_set():
            end.close()
            return
        writer = threading.Thread(target=self._write, args=(end,), name="subagents-link-out")
        writer.daemon = True
        writer.start()
        self._read(end)

    def _read(self, end: LinkEnd) -> None:
        while True:
            try:
                kind, seq, items = end.receive()
            except LinkError:  # the driver went (it fences this host: see the module), or
                end.close()  # sent a frame this end cannot read: closed, so its reader hears
                return  # of it rather than beats from a host that takes nothing more
            if kind == EFFECTS:
                self._deliver(seq, items)
            elif kind == ANSWERS:
                self._answer(items)
            elif kind == DEFINITIONS:
                self._definitions(seq, items)

    def _write(self, end: LinkEnd) -> None:
        while not self._closed.is_set():
            # an empty frame when there was nothing for a while: the driver's reader hears
            # from a live node at least every BEAT_S, and asks Ray about a silent one
            items = self._take(OUTBOX_MOST, BEAT_S)
            try:
                end.send(items)
            except LinkError:
                return

    def close(self) -> None:
        self._closed.set()
        if self._end is not None:
            self._end.close()
            return
        self._gate.close()  # still waiting for the driver: it stops


def _keep_alive(conn: Connection) -> None:
    """The kernel probes an idle connection, so a peer that vanished without a word (a
    machine cut off) ends it eventually even if nothing is sent on it."""
    with contextlib.suppress(OSError):
        sock = socket.fromfd(conn.fileno(), socket.AF_INET, socket.SOCK_STREAM)
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        sock.close()


def _no_delay(conn: Connection) -> None:
    """Small frames go at once (no Nagle delay: a frame is often one mail)."""
    with contextlib.suppress(OSError):
        sock = socket.fromfd(conn.fileno(), socket.AF_INET, socket.SOCK_STREAM)
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.close()  # a duplicate of the descriptor: the connection keeps its own
