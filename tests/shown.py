"""ShownModel: a ``ScriptedModel`` whose ``requests`` (what it was shown) are seen by the test
wherever the calls were made.

Why: tests check what a model was shown (the tools offered, the tool results of the last
turn). With ``--on-cluster`` the runs' steps are taken on the node hosts, each playing its own
pickled copy of the model (docs/cluster.md): the test's copy was shown nothing. A
``ShownModel`` plays the same scripts; each copy (this process's too) sends every request it
is shown to a unix socket served by a thread of the process that made it, and ``requests``
reads them back from there, in the order they arrived. One path for one process and a
cluster (whose local test nodes are on this machine).
"""

from __future__ import annotations

import contextlib
import socket
import struct
from typing import Any

import msgspec

from gates import SocketServer
from subagents.messages import ModelRequest, ModelResponse
from subagents.models.base import CancelSignal
from subagents.models.scripted import ScriptedModel

_SHOWN, _READ = b"s", b"r"
_SIZE = "!I"  # a plain string: the module travels by value to the nodes


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        part = sock.recv(n - len(data))
        if not part:
            raise ConnectionError("the recorder closed the connection")
        data += part
    return data


class _Recorder(SocketServer):
    """The requests shown to every copy of one model, in the process that made it."""

    def __init__(self, owner: object) -> None:
        self.shown: list[bytes] = []
        super().__init__(owner, "sa-shown-")

    def handle(self, conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError, ConnectionError):
            command = _read_exactly(conn, 1)
            if command == _SHOWN:
                (size,) = struct.unpack(_SIZE, _read_exactly(conn, struct.calcsize(_SIZE)))
                item = _read_exactly(conn, size)
                with self.lock:
                    self.shown.append(item)
                conn.sendall(b"1")  # recorded before the model answers the run
            else:
                with self.lock:
                    data = msgspec.msgpack.encode(list(self.shown))
                conn.sendall(struct.pack(_SIZE, len(data)) + data)


class ShownModel(ScriptedModel):
    """A ``ScriptedModel`` whose ``requests`` are every copy's, wherever it was called."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.recorder_path = _Recorder(self).path

    def _call(self, payload: bytes) -> bytes:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(30.0)
            sock.connect(self.recorder_path)
            sock.sendall(payload)
            if payload[:1] == _SHOWN:
                return _read_exactly(sock, 1)
            (size,) = struct.unpack(_SIZE, _read_exactly(sock, struct.calcsize(_SIZE)))
            return _read_exactly(sock, size)

    def complete(
        self,
        request: ModelRequest,
        *,
        deadline: float | None = None,
        cancel: CancelSignal | None = None,
    ) -> ModelResponse:
        item = msgspec.msgpack.encode(request)
        self._call(_SHOWN + struct.pack(_SIZE, len(item)) + item)
        return super().complete(request, deadline=deadline, cancel=cancel)

    @property
    def requests(self) -> tuple[ModelRequest, ...]:
        items = msgspec.msgpack.decode(self._call(_READ), type=list[bytes])
        return tuple(msgspec.msgpack.decode(item, type=ModelRequest) for item in items)
