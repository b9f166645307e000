"""The shared watcher that shuts a stopped run's stream down (``models/stream_watch.py``).

What is proved, on real connected sockets: a watched socket whose run is stopped is shut
down (its peer reads the end); one no longer watched is left alone, even when its run is
stopped after (it may be back in the client's pool, serving another call).
"""

from __future__ import annotations

import socket
import threading

from subagents.models.stream_watch import StreamWatch

WAIT_S = 60.0


def _read_end(sock: socket.socket) -> bytes:
    sock.settimeout(WAIT_S)
    return sock.recv(1)


def test_a_stopped_runs_socket_is_shut_down_and_an_unwatched_one_is_not() -> None:
    watch = StreamWatch()
    cancel = threading.Event()
    kept, kept_peer = socket.socketpair()
    shut, shut_peer = socket.socketpair()
    with kept, kept_peer, shut, shut_peer:
        watch.unwatch(watch.watch(cancel, kept))
        watch.watch(cancel, shut)
        cancel.set()
        assert _read_end(shut_peer) == b""  # the watcher looked (one pass sees every stream)
        kept.sendall(b"x")
        assert _read_end(kept_peer) == b"x"  # the unwatched socket still works both ways
        kept_peer.sendall(b"y")
        assert _read_end(kept) == b"y"


def test_a_blocked_read_is_woken_by_the_stop() -> None:
    watch = StreamWatch()
    cancel = threading.Event()
    sock, peer = socket.socketpair()
    with sock, peer:
        watch.watch(cancel, sock)
        read: list[bytes] = []
        reader = threading.Thread(target=lambda: read.append(_read_end(sock)))
        reader.start()
        cancel.set()
        reader.join(WAIT_S)
        assert read == [b""]
