"""The shared watcher that shuts a stopped run's stream down (``models/stream_watch.py``).

What is proved, on real connected sockets: a watched socket whose run is stopped is shut
down (its peer reads the end); one no longer watched is left alone, even when its run is
stopped after (it may be back in the client's pool, serving another call); a stream read to
its end is unwatched before its connection goes back to the pool; a signal that raises is
dropped and the watcher lives on; a newcomer does not wake a watcher already looking.
"""

from __future__ import annotations

import socket
import threading

import pytest
from httpcore2._sync.connection_pool import PoolByteStream

from fake_messages_api import FakeMessagesAPI, streamed, text_message
from polling import wait_until
from subagents.messages import ChatMessage, ModelRequest, TextBlock
from subagents.models import AnthropicModel, stream_watch
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


def test_a_stream_is_unwatched_before_its_connection_goes_back_to_the_pool(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A stream read to its end is closed by the HTTP client inside the read (its connection,
    kept alive, back in the pool for another call): it must be unwatched by then, or a stop
    coming just after would shut down a socket another call now reads."""
    watch = StreamWatch()
    monkeypatch.setattr(stream_watch, "WATCH", watch)
    watched_at_release: list[int] = []
    release = PoolByteStream.close

    def recording_release(self: PoolByteStream) -> None:
        with watch._lock:
            watched_at_release.append(len(watch._open))
        release(self)

    monkeypatch.setattr(PoolByteStream, "close", recording_release)
    request = ModelRequest(
        model="sonnet",
        system="",
        messages=(ChatMessage(role="user", content=(TextBlock(text="go"),)),),
        agent="talker",
        run_id="r1",
    )
    with (
        FakeMessagesAPI([streamed(text_message("done"))]) as api,
        AnthropicModel(api_key="test", base_url=api.url) as model,
    ):
        model.complete(request, cancel=threading.Event())
    assert watched_at_release, "the stream was never given back"
    assert watched_at_release == [0] * len(watched_at_release)


class _LookedAt:
    """A cancel signal never set that counts the watcher's looks (and can raise instead)."""

    def __init__(self, raises: bool = False) -> None:
        self.raises = raises
        self.looks = 0
        self.looked = threading.Event()

    def is_set(self) -> bool:
        self.looks += 1
        self.looked.set()
        if self.raises:
            raise RuntimeError("a broken cancel signal")
        return False

    def wait(self, timeout: float | None = None) -> bool:
        raise AssertionError("the watcher only looks")


def test_a_signal_that_raises_leaves_the_watcher_serving_the_others() -> None:
    """Before: the raise ended the one watcher thread, and every later stop was missed."""
    watch = StreamWatch()
    broken = _LookedAt(raises=True)
    cancel = threading.Event()
    first, first_peer = socket.socketpair()
    later, later_peer = socket.socketpair()
    with first, first_peer, later, later_peer:
        watch.watch(broken, first)
        assert broken.looked.wait(WAIT_S)
        watch.watch(cancel, later)
        cancel.set()
        assert _read_end(later_peer) == b""  # the watcher lived on
        first.sendall(b"x")
        assert _read_end(first_peer) == b"x"  # the broken one's stream was left alone
        with watch._lock:
            assert broken.looks == 1  # dropped at its raise: no log every round
            assert list(watch._open) == []


def test_a_new_stream_does_not_wake_a_watcher_already_looking() -> None:
    """Before: each ``watch`` woke the watcher for a scan of every open stream (here it looks
    once an hour, so every look is a newcomer's wake-up)."""
    watch = StreamWatch(look_every_s=3600.0)
    sock, peer = socket.socketpair()
    with sock, peer:
        streams = [_LookedAt() for _ in range(50)]
        watch.watch(streams[0], sock)
        wait_until(lambda: watch._lock._waiters, "the watcher waiting")  # type: ignore[attr-defined]
        for stream in streams[1:]:
            watch.watch(stream, sock)
        # A negative wait: it can only pass falsely (a watcher scheduled that late), never
        # fail on a watcher that is not woken.
        assert not streams[-1].looked.wait(1.0)
        assert sum(stream.looks for stream in streams) == 0


def test_a_cancel_set_before_watch_is_seen_while_others_are_open() -> None:
    watch = StreamWatch()
    open_one, open_peer = socket.socketpair()
    stopped, stopped_peer = socket.socketpair()
    with open_one, open_peer, stopped, stopped_peer:
        watch.watch(threading.Event(), open_one)
        cancel = threading.Event()
        cancel.set()
        watch.watch(cancel, stopped)
        assert _read_end(stopped_peer) == b""


def test_a_stream_opened_while_none_is_open_wakes_the_watcher() -> None:
    """The one wake-up ``watch`` still makes (none was open: the watcher may sleep without a
    bound) is not lost: a stopped run's stream is shut down at once, not at the next round
    (an hour here), both after a stream came and went within a round and from the watcher's
    unbounded sleep."""
    watch = StreamWatch(look_every_s=3600.0)
    idle, idle_peer = socket.socketpair()
    first, first_peer = socket.socketpair()
    second, second_peer = socket.socketpair()
    with idle, idle_peer, first, first_peer, second, second_peer:
        watch.unwatch(watch.watch(threading.Event(), idle))
        wait_until(lambda: watch._lock._waiters, "the watcher waiting")  # type: ignore[attr-defined]
        stopped = threading.Event()
        stopped.set()
        watch.watch(stopped, first)  # the watcher in its hour's wait, none open
        assert _read_end(first_peer) == b""
        wait_until(lambda: watch._lock._waiters, "the watcher asleep")  # type: ignore[attr-defined]
        with watch._lock:
            assert list(watch._open) == []  # (so it sleeps without a bound)
        watch.watch(stopped, second)
        assert _read_end(second_peer) == b""
