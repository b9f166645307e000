"""A local stand-in for the Messages API, for tests that use the real anthropic SDK.

Why: the SDK's transport (httpx2) is not intercepted by respx & co, and a real socket is the
honest test of what goes over the wire. The server listens on 127.0.0.1 (port 0: a free one),
records every request, and answers either from a queue of scripted replies or from a handler
function (for multi-turn conversations: look at the request, return the reply).

Usage::

    with FakeMessagesAPI([text_message("hi")]) as api:
        client = anthropic.Anthropic(api_key="test", base_url=api.url, max_retries=0)
        ...
        assert api.requests[0].body["model"] == "claude-sonnet-5-5"

    with FakeMessagesAPI(handler=lambda req: text_message(f"{len(req.body['messages'])}")) as api:
        ...

A reply is a ``Reply`` or a plain dict (sent as a 200 JSON body). ``Reply`` can set the status,
headers (``retry-after``, ``retry-after-ms``...), a delay before answering, a raw (malformed)
body, or ``drop=True`` to close the connection without answering. When the queue is empty and
there is no handler, the server answers 500 with an error body saying so. Queued replies are
used before the handler.

Streaming, as the real API does it: a request with ``"stream": true`` answered by a 200 message
body gets that message as Server-Sent Events (``message_start``, a ``ping``, per block
``content_block_start`` / ``content_block_delta`` (``text_delta`` pieces of ``chunk``
characters, ``input_json_delta`` pieces of the input's JSON) / ``content_block_stop``,
``message_delta``, ``message_stop``), in HTTP/1.1 chunked encoding. ``streamed(...)`` makes a
reply that breaks half way: an ``error`` event after N events (``error_after``), or the
connection cut after N events (``cut_after``: an incomplete chunked body, as a dropped
connection leaves it), or simply ended early (``end_after``: a clean end without
``message_stop``). An error status (4xx, 5xx) is answered as JSON, stream or not, as the API
answers errors found before the stream starts.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "FakeMessagesAPI",
    "Recorded",
    "Reply",
    "error_reply",
    "message",
    "paused",
    "stream_events",
    "streamed",
    "text_message",
    "tool_use_message",
]


@dataclass(frozen=True)
class Reply:
    """One scripted answer.

    ``body``: a dict/list (sent as JSON), or str/bytes (sent as is, e.g. a malformed body).
    ``delay``: seconds to wait before answering (cut short when the server stops).
    ``drop``: close the connection without sending any response.
    """

    body: Any = None
    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    delay: float = 0.0
    drop: bool = False
    events: tuple[tuple[str, Any], ...] | None = None
    """Server-Sent Events to answer with, ``(event name, data)``, instead of ``body``."""
    cut_after: int | None = None
    """Send only this many ``events``, then close the connection in the middle of the body."""
    pause_after: int | None = None
    """Send this many ``events``, then wait until ``resume`` is set (or the server stops)."""
    resume: threading.Event | None = None


@dataclass(frozen=True)
class Recorded:
    """A request the server received. ``headers`` keys are lower-case."""

    method: str
    path: str
    headers: Mapping[str, str]
    raw: bytes
    body: Any
    received_at: float  # time.monotonic()


Handler = Callable[[Recorded], "Reply | Mapping[str, Any]"]

_ids = itertools.count(1)


def message(
    content: list[dict[str, Any]],
    *,
    stop_reason: str = "end_turn",
    model: str = "claude-sonnet-5-5",
    input_tokens: int = 10,
    output_tokens: int = 5,
    cache_creation_input_tokens: int = 0,
    cache_read_input_tokens: int = 0,
) -> dict[str, Any]:
    """A Messages API response body."""
    return {
        "id": f"msg_fake_{next(_ids)}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "cache_creation_input_tokens": cache_creation_input_tokens,
            "cache_read_input_tokens": cache_read_input_tokens,
        },
    }


def text_message(text: str, **kwargs: Any) -> dict[str, Any]:
    """A response with one text block."""
    return message([{"type": "text", "text": text}], **kwargs)


def tool_use_message(
    calls: Iterable[tuple[str, str, dict[str, Any]]], *, text: str | None = None, **kwargs: Any
) -> dict[str, Any]:
    """A ``tool_use`` response: ``calls`` are ``(id, name, input)``, optional leading text."""
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    content += [{"type": "tool_use", "id": i, "name": n, "input": inp} for i, n, inp in calls]
    kwargs.setdefault("stop_reason", "tool_use")
    return message(content, **kwargs)


def stream_events(body: Mapping[str, Any], *, chunk: int = 8) -> list[tuple[str, Any]]:
    """A message body as the API streams it: the events, text and tool input in pieces of
    ``chunk`` characters."""
    usage = dict(body.get("usage") or {})
    start = {**body, "content": [], "stop_reason": None, "stop_sequence": None}
    start["usage"] = {**usage, "output_tokens": 1}
    events: list[tuple[str, Any]] = [
        ("message_start", {"type": "message_start", "message": start}),
        ("ping", {"type": "ping"}),
    ]
    for index, block in enumerate(body.get("content") or []):
        if block.get("type") == "text":
            opened: dict[str, Any] = {"type": "text", "text": ""}
            delta_type, key, whole = "text_delta", "text", str(block["text"])
        elif block.get("type") == "tool_use":
            opened = {**block, "input": {}}
            delta_type, key = "input_json_delta", "partial_json"
            whole = json.dumps(block["input"])
        else:
            opened, delta_type, key, whole = dict(block), "", "", ""
        events.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": opened},
            )
        )
        for at in range(0, len(whole), max(1, chunk)):
            delta = {"type": delta_type, key: whole[at : at + chunk]}
            events.append(
                (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                )
            )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    stop = {"stop_reason": body.get("stop_reason"), "stop_sequence": body.get("stop_sequence")}
    ending = {"output_tokens": usage.get("output_tokens", 0)}
    events.append(("message_delta", {"type": "message_delta", "delta": stop, "usage": ending}))
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def streamed(
    body: Mapping[str, Any],
    *,
    chunk: int = 8,
    error_after: int | None = None,
    error_type: str = "overloaded_error",
    cut_after: int | None = None,
    end_after: int | None = None,
) -> Reply:
    """A streamed reply of ``body``, whole or broken after so many events: an ``error``
    event (``error_after``), the connection cut (``cut_after``), or a clean end
    (``end_after``)."""
    events = stream_events(body, chunk=chunk)
    if error_after is not None:
        error = {"type": "error", "error": {"type": error_type, "message": "stream broke"}}
        events = [*events[:error_after], ("error", error)]
    if end_after is not None:
        events = events[:end_after]
    return Reply(events=tuple(events), cut_after=cut_after)


def paused(body: Mapping[str, Any], after: int, *, chunk: int = 8) -> tuple[Reply, threading.Event]:
    """A streamed reply of ``body`` that stops after ``after`` events until the event
    returned is set: a model that is half way through writing, for as long as a test needs."""
    resume = threading.Event()
    events = tuple(stream_events(body, chunk=chunk))
    return Reply(events=events, pause_after=after, resume=resume), resume


def error_reply(
    status: int, error_type: str, text: str, *, headers: Mapping[str, str] | None = None
) -> Reply:
    """An API error response with the API's error body and a request-id header."""
    request_id = f"req_fake_{next(_ids)}"
    body = {
        "type": "error",
        "error": {"type": error_type, "message": text},
        "request_id": request_id,
    }
    all_headers = {"request-id": request_id, **(headers or {})}
    return Reply(body=body, status=status, headers=all_headers)


class FakeMessagesAPI:
    """A threaded HTTP server speaking ``POST /v1/messages``. A context manager."""

    def __init__(
        self, replies: Iterable[Reply | Mapping[str, Any]] = (), *, handler: Handler | None = None
    ) -> None:
        self._lock = threading.Lock()
        self._queue: deque[Reply | Mapping[str, Any]] = deque(replies)
        self.handler = handler
        self._requests: list[Recorded] = []
        self._stopping = threading.Event()
        self._connections: set[socket.socket] = set()
        self.chunk = 8
        """The piece size of a message body streamed for a ``"stream": true`` request."""
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._request_handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.02},  # shutdown() waits up to one poll interval
            name="fake-messages-api",
            daemon=True,
        )

    @property
    def url(self) -> str:
        """The base URL to give the SDK (``base_url=``)."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def requests(self) -> list[Recorded]:
        """Every request received so far, in arrival order (a copy)."""
        with self._lock:
            return list(self._requests)

    def add(self, *replies: Reply | Mapping[str, Any]) -> None:
        """Queue more replies."""
        with self._lock:
            self._queue.extend(replies)

    def start(self) -> FakeMessagesAPI:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, cut pending delays short, close the socket; idempotent."""
        self._stopping.set()
        if self._thread.is_alive():
            self._server.shutdown()
            self._thread.join(timeout=5)
        self._server.server_close()
        with self._lock:
            connections = list(self._connections)
        for connection in connections:  # wake handler threads waiting on keep-alive sockets
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)

    def __enter__(self) -> FakeMessagesAPI:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- serving ----------------------------------------------------------------------------

    def _next_reply(self, recorded: Recorded) -> Reply:
        with self._lock:
            self._requests.append(recorded)
            queued = self._queue.popleft() if self._queue else None
        if queued is None and self.handler is not None:
            queued = self.handler(recorded)
        if queued is None:
            return error_reply(500, "api_error", "fake server: no scripted reply left")
        if isinstance(queued, Reply):
            return queued
        return Reply(body=dict(queued))

    def _request_handler_class(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                with api._lock:
                    api._connections.add(self.connection)

            def finish(self) -> None:
                with api._lock:
                    api._connections.discard(self.connection)
                with contextlib.suppress(OSError):
                    super().finish()

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                try:
                    body: Any = json.loads(raw) if raw else None
                except ValueError:
                    body = None
                recorded = Recorded(
                    method="POST",
                    path=self.path,
                    headers={k.lower(): v for k, v in self.headers.items()},
                    raw=raw,
                    body=body,
                    received_at=time.monotonic(),
                )
                if self.path.split("?")[0] != "/v1/messages":
                    reply = error_reply(404, "not_found_error", f"fake server: no {self.path}")
                    with api._lock:
                        api._requests.append(recorded)
                else:
                    try:
                        reply = api._next_reply(recorded)
                    except Exception as exc:  # a bug in a test's handler: say so, loudly
                        reply = error_reply(500, "api_error", f"fake server handler raised {exc!r}")
                if reply.delay and api._stopping.wait(reply.delay):
                    self.close_connection = True
                    return
                if reply.drop:
                    self.close_connection = True
                    return
                if reply.events is None and _streams(recorded, reply):
                    reply = Reply(events=tuple(stream_events(reply.body, chunk=api.chunk)))
                if reply.events is not None:
                    self._send_events(reply)
                    return
                self._send(reply)

            def _send_events(self, reply: Reply) -> None:
                """The events as SSE in chunked encoding, one HTTP chunk per event; a cut
                leaves the body without its last chunk, as a dropped connection does."""
                assert reply.events is not None
                events = reply.events
                if reply.cut_after is not None:
                    events = events[: reply.cut_after]
                try:
                    self.send_response(reply.status)
                    headers = {
                        "content-type": "text/event-stream",
                        "transfer-encoding": "chunked",
                        "request-id": f"req_fake_{next(_ids)}",
                        **reply.headers,
                    }
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    for sent, (name, data) in enumerate(events):
                        if sent == reply.pause_after and reply.resume is not None:
                            while not (reply.resume.wait(0.05) or api._stopping.is_set()):
                                pass
                        frame = f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(frame), frame))
                        self.wfile.flush()
                    if reply.cut_after is None:
                        self.wfile.write(b"0\r\n\r\n")
                except (BrokenPipeError, ConnectionResetError):
                    pass
                self.close_connection = True

            def _send(self, reply: Reply) -> None:
                if isinstance(reply.body, bytes):
                    data = reply.body
                elif isinstance(reply.body, str):
                    data = reply.body.encode()
                else:
                    data = json.dumps(reply.body).encode()
                try:
                    self.send_response(reply.status)
                    headers = {"content-type": "application/json", **reply.headers}
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True  # the client gave up (its timeout)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # quiet: tests assert on ``api.requests`` instead

        return _Handler


def _streams(recorded: Recorded, reply: Reply) -> bool:
    """A ``"stream": true`` request answered by a 200 message body: sent as events."""
    body = recorded.body
    wants = isinstance(body, dict) and body.get("stream") is True
    return wants and reply.status == 200 and isinstance(reply.body, dict)
