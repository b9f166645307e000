"""Gate (a ``threading.Event``) and Tally (counts of what runs at once) that also work across
the processes of this machine.

Why: a test's function agent often waits until the test lets it go on (``release.wait()``),
or tells the test it got somewhere (``heard.set()``). With ``--on-cluster`` the function runs
in a node host, another process, holding a pickled copy of what it closes over: a
``threading.Event`` does not pickle, and a copy of one would not hear the test's ``set``.
A ``Gate`` pickles to the path of a unix socket served by a thread of the process that made
it; every ``set``, ``wait`` and ``is_set`` goes through that socket, in that process as in any
other, so a test behaves the same on one process and on a cluster (whose local test nodes are
on this machine). Waits block on the socket with a timeout: no polling, no sleeps.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import tempfile
import threading
import weakref
from collections import Counter
from collections.abc import Iterator
from typing import Any

_OPEN, _WAIT, _ASK = b"s", b"w", b"q"
GATE_THREAD = "test-gate"
"""The name of the thread serving a gate (tests that look for threads left behind skip it)."""


class SocketServer:
    """A unix socket served by a daemon thread of the process that made it, in a folder of its
    own under /tmp (a socket's path must be short), closed and removed when ``owner`` is
    collected. Subclasses answer each connection (``handle``); the Gate, the Tally and
    ``shown.ShownModel`` each serve one."""

    def __init__(self, owner: object, prefix: str) -> None:
        folder = tempfile.mkdtemp(prefix=prefix, dir="/tmp")
        self.path = os.path.join(folder, "socket")
        self.lock = threading.Lock()
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(self.path)
        self.sock.listen(128)
        threading.Thread(target=self._serve, name=GATE_THREAD, daemon=True).start()
        weakref.finalize(owner, _remove, self, folder)

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:  # closed: its owner was collected
                return
            self.handle(conn)

    def handle(self, conn: socket.socket) -> None:
        raise NotImplementedError

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()


def _remove(server: SocketServer, folder: str) -> None:
    server.close()
    shutil.rmtree(folder, ignore_errors=True)


class _GateServer(SocketServer):
    """The state of one gate, in the process that made it: open or not, who waits."""

    def __init__(self, owner: object) -> None:
        self.opened = False
        self.waiting: list[socket.socket] = []
        super().__init__(owner, "sa-gate-")

    def handle(self, conn: socket.socket) -> None:
        with contextlib.suppress(OSError):
            self._command(conn, conn.recv(1))

    def _command(self, conn: socket.socket, command: bytes) -> None:
        with self.lock:
            if command == _OPEN:
                self.opened = True
                waiting, self.waiting = self.waiting, []
                for other in [*waiting, conn]:
                    with contextlib.suppress(OSError):
                        other.sendall(b"1")
                    other.close()
            elif command == _WAIT and not self.opened:
                self.waiting.append(conn)
            else:  # a wait on an open gate, or a question
                conn.sendall(b"1" if self.opened else b"0")
                conn.close()

    def close(self) -> None:
        super().close()
        for conn in self.waiting:
            conn.close()


class Gate:
    """Closed until ``set``; ``wait(timeout)`` returns True once it is open, False past the
    timeout; usable from any process of this machine that holds a (pickled) copy."""

    def __init__(self) -> None:
        self.path = _GateServer(self).path

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path}  # a copy talks to the maker's server; it owns nothing

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.path = state["path"]

    def _call(self, command: bytes, timeout: float | None) -> bool:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            sock.connect(self.path)
            sock.sendall(command)
            try:
                return sock.recv(1) == b"1"
            except TimeoutError:
                return False

    def set(self) -> None:
        self._call(_OPEN, None)

    def wait(self, timeout: float | None = None) -> bool:
        return self._call(_WAIT, timeout)

    def is_set(self) -> bool:
        return self._call(_ASK, None)


class _TallyServer(SocketServer):
    """The counts of one tally, in the process that made it."""

    def __init__(self, owner: object) -> None:
        self.running: Counter[str] = Counter()
        self.peak: Counter[str] = Counter()
        super().__init__(owner, "sa-tally-")

    def handle(self, conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError, ValueError):
            command, *keys = conn.makefile("r").readline().split()
            with self.lock:
                step = {"+": 1, "-": -1}.get(command, 0)
                for key in keys:
                    self.running[key] += step
                    self.peak[key] = max(self.peak[key], self.running[key])
                peak = dict(self.peak)
            conn.sendall(json.dumps(peak).encode())


class Tally:
    """Counts what is going on at once, per key, and keeps each key's peak, across the
    processes of this machine (a function agent on a node host counts into the test's tally):
    ``with tally.counting("global", "agent:x"): ...``; ``peak()`` -> ``{key: peak}``. Each
    entry and exit is recorded before the call returns, so an overlap it reports happened."""

    def __init__(self) -> None:
        self.path = _TallyServer(self).path

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.path = state["path"]

    def _call(self, line: str) -> dict[str, int]:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(30.0)
            sock.connect(self.path)
            sock.sendall(line.encode() + b"\n")
            sock.shutdown(socket.SHUT_WR)
            data = b""
            while part := sock.recv(65536):
                data += part
        peak: dict[str, int] = json.loads(data)
        return peak

    @contextlib.contextmanager
    def counting(self, *keys: str) -> Iterator[None]:
        self._call(" ".join(["+", *keys]))
        try:
            yield
        finally:
            self._call(" ".join(["-", *keys]))

    def add(self, *keys: str) -> None:
        """One more of each key, never taken back: its peak is how many were added."""
        self._call(" ".join(["+", *keys]))

    def peak(self) -> dict[str, int]:
        return self._call("?")
