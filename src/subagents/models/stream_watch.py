"""One thread for the process that ends an open model stream when its run is stopped.

Why: a read that gets no bytes (a server silent after its headers) is woken by nothing the
reading thread could check; the HTTP client's read timeout (the time left to the deadline,
600 s without one) was its only end, and a stopped run's thread was held that long. Shutting
the socket down (``shutdown(SHUT_RDWR)``, which wakes a ``recv`` blocked on it on Linux, as
closing the descriptor does not) from another thread ends that read at once.

Why one shared thread and not one per stream: the runtime runs thousands of runs; a thread
per call would double them. Why it looks (every ``LOOK_EVERY_S``) instead of being told: a
cancel signal is any ``CancelSignal`` (``threading.Event`` is one), which calls nobody back.
It looks only while a stream is open and sleeps without a bound otherwise; so a new stream
wakes it only when none was open (a watcher already looking sees the newcomer, and a cancel set
before ``watch``, in its next round): waking it for each newcomer made a scan of every open
stream per ``watch``, quadratic when very many streams start together.

A cancel signal whose ``is_set`` raises is logged and no longer watched (its stream ends as it
did before the watcher: at its end, at the client's read timeout, or when its run next looks
at the signal between events): keeping it would log every round for the stream's life, and
shutting it down would end a stream whose run nobody stopped. Either way the one watcher
thread lives on for the other streams.

A stream is watched between ``watch`` and ``unwatch``: both, and the shutdown, hold one
lock, so once ``unwatch`` returned the socket is never shut down (it may go back to the
client's pool and serve another call).
"""

from __future__ import annotations

import os
import socket
import threading
from typing import Any

import structlog

from subagents.models.base import CancelSignal

log = structlog.get_logger(__name__)

LOOK_EVERY_S = 0.2
"""How often the watcher looks at the open streams' cancel signals: a stop is seen this late."""


class StreamWatch:
    """The open streams' sockets by their cancel signals, and the thread that shuts a
    stopped run's down."""

    def __init__(self, look_every_s: float = LOOK_EVERY_S) -> None:
        self._look_every_s = look_every_s
        self._lock = threading.Condition(threading.Lock())
        self._open: dict[int, tuple[CancelSignal, socket.socket]] = {}
        self._next = 0
        self._thread: threading.Thread | None = None

    def watch(self, cancel: CancelSignal, sock: socket.socket) -> int:
        """Watch ``sock`` until ``unwatch`` of the key returned."""
        with self._lock:
            self._next += 1
            self._open[self._next] = (cancel, sock)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="subagents-stream-watch", daemon=True
                )
                self._thread.start()
            elif len(self._open) == 1:  # it slept without a bound: none was open
                self._lock.notify()
            return self._next

    def unwatch(self, key: int) -> None:
        with self._lock:
            self._open.pop(key, None)

    def _run(self) -> None:
        with self._lock:
            while True:
                self._lock.wait(self._look_every_s if self._open else None)
                for key in self._stopped():
                    _shut_down(self._open.pop(key)[1])

    def _stopped(self) -> list[int]:
        """The keys of the streams whose run is stopped; a stream whose signal raised is
        dropped here (logged), the rest looked at as usual."""
        stopped: list[int] = []
        for key, (cancel, _) in list(self._open.items()):
            try:
                if cancel.is_set():
                    stopped.append(key)
            except Exception:  # any signal's own failure: never the watcher's end
                log.warning(
                    "a run's cancel signal raised: its stream is no longer watched for a stop",
                    exc_info=True,
                )
                del self._open[key]
        return stopped


def _shut_down(sock: socket.socket) -> None:
    """End the reads of ``sock`` (``socket.socket``'s own ``shutdown``: an ``SSLSocket``'s
    would drop its TLS object under the reading thread's feet)."""
    try:
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except OSError as exc:  # closed or reset already: the read has ended or will
        log.debug("a stopped run's stream could not be shut down", error=str(exc))


WATCH = StreamWatch()
"""The process's one watcher."""


def _forget_in_child() -> None:
    """A forked child has none of its parent's threads nor its streams: a watcher anew."""
    global WATCH
    WATCH = StreamWatch()


os.register_at_fork(after_in_child=_forget_in_child)


def socket_of(response: Any) -> socket.socket | None:
    """The socket an ``httpx2`` response is read from (httpcore2's ``network_stream``
    extension), or None (another transport, or HTTP/2's connection, shared by many calls)."""
    if response.extensions.get("http_version") == b"HTTP/2":  # one socket for many calls
        return None
    stream = response.extensions.get("network_stream")
    sock = stream.get_extra_info("socket") if stream is not None else None
    return sock if isinstance(sock, socket.socket) else None
