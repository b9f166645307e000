"""A model server that answers, then only keeps its stream alive: the run's thread lets go.

The Messages API sends ``ping`` events while a turn takes long; a server stuck in that state
(or one that dribbles a byte now and then) never trips the HTTP client's read timeout, which
counts the time between two reads. Each test below speaks real HTTP (chunked Server-Sent
Events on a local socket) to the real SDK, and watches the one thing that shows the run's
thread came back: the client closing its connection. Before the stream honoured the run's
stop and deadline, the thread read pings for ever: past the run's timeout, past its stop and
past ``rt.close()``.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from fake_messages_api import stream_events, text_message
from subagents.definitions.spec import AgentSpec
from subagents.messages import ChatMessage, EventKind, ModelRequest, RunStatus, TextBlock
from subagents.models import AnthropicModel, ModelError
from subagents.runtime import Runtime

STALL = "stall here"
SILENT = "silent"
"""In a task with ``STALL``: after its first event the stream sends nothing at all."""
SLOW = "slow but sure"
"""A task with it is answered whole, but only after ``PingingServer.slow_s`` of pings."""
PING_EVERY_S = 0.05
WAIT_S = 60.0
"""How long a test waits for what it expects (an event wait; the machine may be loaded)."""
SILENT_WAIT_S = 20.0
"""The silent stream's wait: far below the 600 s read timeout it would otherwise end at."""


class PingingServer:
    """Answers a request whose task says ``STALL`` with a stream that sends pings for ever;
    any other with a whole text message. ``stalled`` is set when a stalled stream began,
    ``let_go`` when its client closed the connection."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.stalled = threading.Event()
        self.let_go = threading.Event()
        self.closed = threading.Event()
        self.slow_s = 0.0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self.closed.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            try:
                request = _read_request(conn)
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                    b"transfer-encoding: chunked\r\n\r\n"
                )
                if SLOW in request:  # a long turn: pings, then the answer, whole
                    events = stream_events(text_message("worth the wait"))
                    _event(conn, *events[0])
                    began = time.monotonic()
                    while time.monotonic() - began < self.slow_s:
                        self.closed.wait(PING_EVERY_S)
                        _event(conn, "ping", {"type": "ping"})
                    for name, data in events[1:]:
                        _event(conn, name, data)
                    conn.sendall(b"0\r\n\r\n")
                    return
                if STALL not in request:
                    for name, data in stream_events(text_message("done")):
                        _event(conn, name, data)
                    conn.sendall(b"0\r\n\r\n")
                    return
                if SILENT in request:  # up to the first piece of text, then nothing
                    for name, data in stream_events(text_message("never"))[:4]:
                        _event(conn, name, data)
                    self.stalled.set()
                    conn.recv(1)  # b"" once the client closes its end
                    self.let_go.set()
                    return
                _event(conn, *stream_events(text_message("never"))[0])
                self.stalled.set()
                while not self.closed.wait(PING_EVERY_S):
                    _event(conn, "ping", {"type": "ping"})
            except OSError:
                if STALL in request:
                    self.let_go.set()

    def close(self) -> None:
        self.closed.set()
        self.sock.close()


def _read_request(conn: socket.socket) -> str:
    data = b""
    while b"\r\n\r\n" not in data:
        data += conn.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        body += conn.recv(65536)
    return body.decode()


def _event(conn: socket.socket, name: str, data: Any) -> None:
    payload = f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
    conn.sendall(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")


AGENTS = [AgentSpec(name="talker", description="Talks.", prompt="Answer.")]


@pytest.fixture
def server() -> Iterator[PingingServer]:
    srv = PingingServer()
    yield srv
    srv.close()


@pytest.fixture
def rt(server: PingingServer) -> Iterator[Runtime]:
    model = AnthropicModel(api_key="test", base_url=server.url)
    with Runtime(AGENTS, model=model) as runtime:
        yield runtime
    model.close()


def test_a_stream_of_pings_ends_at_the_runs_timeout_and_its_thread_lets_go(
    rt: Runtime, server: PingingServer
) -> None:
    handle = rt.spawn("talker", STALL, timeout=1.0)
    outcome = handle.result(timeout=WAIT_S)
    assert outcome.status is RunStatus.TIMED_OUT
    assert server.let_go.wait(WAIT_S), "the run timed out but its thread still reads the stream"


def test_a_stop_ends_a_stream_of_pings_and_the_other_runs_go_on(
    rt: Runtime, server: PingingServer
) -> None:
    stuck = rt.spawn("talker", STALL)
    assert server.stalled.wait(WAIT_S)
    other = rt.spawn("talker", "answer")
    assert other.result(timeout=WAIT_S).result == "done"
    rt.stop(stuck.run_id)
    assert stuck.result(timeout=WAIT_S).status is RunStatus.CANCELLED
    assert server.let_go.wait(WAIT_S), "the run was stopped but its thread still reads the stream"


def test_close_lets_go_of_a_stream_of_pings(server: PingingServer) -> None:
    model = AnthropicModel(api_key="test", base_url=server.url)
    rt = Runtime(AGENTS, model=model)
    handle = rt.spawn("talker", STALL)
    assert server.stalled.wait(WAIT_S)
    rt.close()
    try:
        assert handle.result(timeout=WAIT_S).status is RunStatus.CANCELLED
        assert server.let_go.wait(WAIT_S), "the runtime closed but a thread still reads"
    finally:
        model.close()  # closing the client's connections would free the thread by itself


def test_a_long_stream_without_a_deadline_is_not_cut(
    server: PingingServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call without a deadline (the model used on its own) has no bound on the whole
    stream: streaming is how a turn longer than the per-read timeout is asked for (the SDK's
    own advice for one over 10 minutes). Cut, it was asked for again, and paid for again,
    ``max_attempts`` times, then failed. Here the per-read timeout is 2 s and the answer
    comes, pinged all along, after 3 s of the server's own clock."""
    monkeypatch.setattr("subagents.models.anthropic.NO_DEADLINE_TIMEOUT_S", 2.0)
    server.slow_s = 3.0
    request = ModelRequest(
        model="sonnet",
        system="",
        messages=(ChatMessage(role="user", content=(TextBlock(text=SLOW),)),),
        agent="talker",
        run_id="r1",
    )
    with AnthropicModel(api_key="test", base_url=server.url) as model:
        response = model.complete(request)
    assert response.content == (TextBlock(text="worth the wait"),)


def test_a_stop_ends_a_silent_stream(rt: Runtime, server: PingingServer) -> None:
    text_read = threading.Event()  # published once the client has read all that was sent
    rt.subscribe(lambda event: text_read.set() if event.kind is EventKind.TEXT_DELTA else None)
    stuck = rt.spawn("talker", f"{STALL} {SILENT}")
    assert text_read.wait(WAIT_S)
    rt.stop(stuck.run_id)
    assert stuck.result(timeout=WAIT_S).status is RunStatus.CANCELLED
    assert server.let_go.wait(SILENT_WAIT_S), "the run was stopped but its thread still reads"


def test_close_lets_go_of_a_silent_stream(server: PingingServer) -> None:
    """``rt.close()`` stops its runs as ``rt.stop`` does: a stream silent after its headers
    lets go too, the client's connections still open (``model.close()`` comes after)."""
    model = AnthropicModel(api_key="test", base_url=server.url)
    rt = Runtime(AGENTS, model=model)
    text_read = threading.Event()
    rt.subscribe(lambda event: text_read.set() if event.kind is EventKind.TEXT_DELTA else None)
    handle = rt.spawn("talker", f"{STALL} {SILENT}")
    assert text_read.wait(WAIT_S)
    rt.close()
    try:
        assert handle.result(timeout=WAIT_S).status is RunStatus.CANCELLED
        assert server.let_go.wait(SILENT_WAIT_S), "the runtime closed but a thread still reads"
    finally:
        model.close()


class _StopAtText:
    """A sink that stops its call (sets ``cancel``) at the first piece of text: the server
    has sent all it will send by then."""

    def __init__(self, cancel: threading.Event) -> None:
        self.cancel = cancel

    def text(self, text: str) -> None:
        self.cancel.set()

    def tool_input(self, tool: str, partial_json: str) -> None:
        pass

    def void(self) -> None:
        pass


def test_a_stopped_call_on_a_silent_stream_fails_cancelled(server: PingingServer) -> None:
    """The model used on its own, no deadline: the stop ends the call as ``cancelled`` (the
    stop's own error, not a broken connection asked for again)."""
    cancel = threading.Event()
    request = ModelRequest(
        model="sonnet",
        system="",
        messages=(ChatMessage(role="user", content=(TextBlock(text=f"{STALL} {SILENT}"),)),),
        agent="talker",
        run_id="r1",
    )
    model = AnthropicModel(api_key="test", base_url=server.url)
    with model, pytest.raises(ModelError) as failed:
        model.stream(request, _StopAtText(cancel), cancel=cancel)
    assert failed.value.kind == "cancelled"
    assert "stopped while the model's answer streamed in" in str(failed.value)
    assert server.let_go.wait(SILENT_WAIT_S)
