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
                self._send(reply)

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
