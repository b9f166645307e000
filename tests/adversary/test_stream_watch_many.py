"""The process's stream watcher (``models/stream_watch.py``) under an outsider's load: a
thousand streams open at once, their stops racing their ends from many threads, and a fork
while streams are open (while the parent's watcher holds its lock, the worst moment).

Real connected sockets and real threads; each wait is a read of the peer with a timeout
(the watcher's shutdown is an end of stream there), never a sleep.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import threading

from subagents.models import stream_watch

STREAMS = 1_000
THREADS = 8
WAIT_S = 60.0


def _ended(sock: socket.socket) -> bool:
    """Whether ``sock`` reads the end of its stream (its peer was shut down) within WAIT_S."""
    sock.settimeout(WAIT_S)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False


def _works(sock: socket.socket, peer: socket.socket) -> bool:
    """Whether ``sock`` still carries a byte to ``peer`` (it was never shut down)."""
    try:
        sock.sendall(b"x")
        peer.settimeout(WAIT_S)
        return peer.recv(1) == b"x"
    except OSError:
        return False


def test_a_thousand_streams_stopped_and_ended_at_once_from_many_threads() -> None:
    """Each stream either ends before its stop (unwatched, then stopped: never shut down,
    it may be back in the pool), is stopped as it ends (either way, never a wrong one), or
    is stopped while open (shut down). Afterwards the watcher holds nothing."""
    watch = stream_watch.WATCH
    pairs = [socket.socketpair() for _ in range(STREAMS)]
    try:
        cancels = [threading.Event() for _ in pairs]
        keys = [watch.watch(c, p[0]) for c, p in zip(cancels, pairs, strict=True)]
        fate: dict[int, str] = {}

        def end_some(ids: list[int], seed: int) -> None:
            pick = random.Random(seed)
            for i in ids:
                roll = pick.random()
                if roll < 0.4:
                    watch.unwatch(keys[i])
                    cancels[i].set()
                    fate[i] = "ended, then stopped"
                elif roll < 0.7:
                    cancels[i].set()
                    watch.unwatch(keys[i])
                    fate[i] = "stopped as it ended"
                else:
                    cancels[i].set()
                    fate[i] = "stopped while open"

        order = list(range(STREAMS))
        random.Random(1).shuffle(order)
        threads = [
            threading.Thread(target=end_some, args=(order[k::THREADS], k)) for k in range(THREADS)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(WAIT_S)
        assert len(fate) == STREAMS
        wrong = [
            (i, fate[i])
            for i in range(STREAMS)
            if (fate[i] == "ended, then stopped" and not _works(pairs[i][0], pairs[i][1]))
            or (fate[i] == "stopped while open" and not _ended(pairs[i][1]))
        ]
        assert wrong == []
        assert set(fate.values()) == {
            "ended, then stopped",
            "stopped as it ended",
            "stopped while open",
        }
        with watch._lock:
            left = [k for k in watch._open if k in set(keys)]
        assert left == []
    finally:
        for a, b in pairs:
            a.close()
            b.close()


def test_a_fork_while_streams_are_open_gives_the_child_a_watcher_of_its_own() -> None:
    """The parent's watcher lock is held (as its thread holds it while it looks) when the
    process forks: the child's stream is still shut down on its stop (a child using the
    parent's watcher would wait on a lock no thread of its will ever release), an inherited
    key unwatched in the child touches nothing, and the parent's streams are still watched."""
    watch = stream_watch.WATCH
    opened = [socket.socketpair() for _ in range(50)]
    try:
        cancels = [threading.Event() for _ in opened]
        keys = [watch.watch(c, p[0]) for c, p in zip(cancels, opened, strict=True)]
        holding, let_go = threading.Event(), threading.Event()

        def hold() -> None:
            with watch._lock:
                holding.set()
                let_go.wait(WAIT_S)

        holder = threading.Thread(target=hold)
        holder.start()
        assert holding.wait(WAIT_S)
        pid = os.fork()
        if pid == 0:  # the child: no pytest here, only its exit status
            status = 3
            signal.alarm(int(WAIT_S))  # stuck on the parent's lock: killed, not hung
            try:
                mine, peer = socket.socketpair()
                stopped = threading.Event()
                stopped.set()
                stream_watch.WATCH.unwatch(keys[0])  # (an inherited key: not the child's)
                stream_watch.WATCH.watch(stopped, mine)
                status = 0 if _ended(peer) else 1
            finally:
                os._exit(status)
        let_go.set()
        holder.join(WAIT_S)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        cancels[3].set()
        assert _ended(opened[3][1])  # the parent's watcher still shuts its streams down
        for key in keys:
            watch.unwatch(key)
    finally:
        for a, b in opened:
            a.close()
            b.close()
