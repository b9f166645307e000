"""One streamed Messages API call: the SDK's events read, their pieces handed to a sink.

Why apart from ``anthropic.py``: what the stream's events mean (which block a delta belongs
to, when a stream is whole) is its own concern; the client, the retries and the mapping of
errors stay there. The SDK's ``MessageStream`` accumulates the message as the events come
(``get_final_message``); its JSON form is decoded by ``anthropic_wire.parse_response``, the
very decoding a non-streamed body gets, so a streamed turn is recorded exactly as the same
turn answered in one body would be.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx2
import msgspec

from subagents.models import stream_watch
from subagents.models.anthropic_wire import ParsedResponse, parse_response
from subagents.models.base import CancelSignal, ModelError, StreamSink
from subagents.models.retry import TransientError
from subagents.models.stream_watch import socket_of


def read_stream(
    stream: Any,
    sink: StreamSink | None,
    *,
    cancel: CancelSignal | None = None,
    within: float | None = None,
    since: float | None = None,
) -> ParsedResponse:
    """Read ``stream`` (an entered ``anthropic.lib.streaming.MessageStream``) to its end,
    handing each text and tool-input delta to ``sink``; the whole message, decoded.

    A stream that ends without its ``message_stop`` (the connection closed between two
    events) is a ``TransientError``: the turn is not whole, and is asked for again.

    Why ``cancel`` and ``within`` are looked at as each piece of the body arrives
    (``_Watched``, under the SDK, which drops ``ping`` events before we would see them): the
    HTTP client's read timeout counts the time between two reads, so a server that keeps
    the stream alive (``ping`` events, as the API sends while a turn takes long, or a byte
    now and then) and never finishes would hold the run's thread for ever, past its stop and
    its deadline. A stopped run's stream ends at its next piece (``ModelError``
    ``cancelled``); one still open ``within`` seconds after ``since`` (the attempt's start;
    else the stream's) is a ``TransientError`` ``timeout``; ``within`` None: no such bound.
    A read that gets no bytes at all (a server silent after its headers) is woken by the
    run's stop too: while the stream is open its socket is watched (``stream_watch``), shut
    down once the run is stopped. The stream's end closes its connection."""
    kind_of_body = stream.response.headers.get("content-type", "")
    if not kind_of_body.startswith("text/event-stream"):
        body = stream.response.read()
        raise ModelError(
            "malformed_response",
            f"expected an event stream, got {kind_of_body or 'no content-type'}: "
            f"{body[:200].decode('utf-8', errors='replace')!r}",
        )
    response = stream.response
    until = None if within is None else (time.monotonic() if since is None else since) + within
    sock = socket_of(response) if cancel is not None else None
    key = stream_watch.WATCH.watch(cancel, sock) if cancel is not None and sock else None
    watched = _Watched(response.stream, cancel, until, within, key)
    response.stream = watched
    try:
        return _read_events(stream, sink)
    finally:
        watched.unwatch()


def _read_events(stream: Any, sink: StreamSink | None) -> ParsedResponse:
    tools: dict[int, str] = {}
    stopped = False
    for event in stream:
        kind = event.type
        if kind == "content_block_delta" and sink is not None:
            delta = event.delta
            if delta.type == "text_delta":
                sink.text(delta.text)
            elif delta.type == "input_json_delta" and event.index in tools:
                sink.tool_input(tools[event.index], delta.partial_json)
        elif kind == "content_block_start":
            block = event.content_block
            if block.type == "tool_use":
                tools[event.index] = block.name
        elif kind == "message_stop":
            stopped = True
    if not stopped:
        raise TransientError("connection", "the response stream ended before message_stop")
    final = stream.get_final_message()
    return parse_response(msgspec.json.encode(final.to_dict(mode="json", warnings=False)))


class _Watched(httpx2.SyncByteStream):
    """A response body that stops being read when its run no longer wants it."""

    def __init__(
        self,
        inner: httpx2.SyncByteStream,
        cancel: CancelSignal | None,
        until: float | None,
        within: float | None,
        key: int | None = None,
    ) -> None:
        self._inner = inner
        self._cancel = cancel
        self._until = until
        self._within = within
        self._key = key  # its socket's in ``stream_watch.WATCH`` while the stream is open

    def __iter__(self) -> Iterator[bytes]:
        try:
            yield from self._pieces()
        except httpx2.TransportError as exc:  # a stop's shutdown of the socket (stream_watch)
            if self._cancel is not None and self._cancel.is_set():
                raise _cancelled() from exc
            raise

    def _pieces(self) -> Iterator[bytes]:
        for piece in self._inner:
            if self._cancel is not None and self._cancel.is_set():
                raise _cancelled()
            if self._until is not None and time.monotonic() >= self._until:
                raise TransientError(
                    "timeout",
                    f"the response stream was still open after {self._within:.2f} s (the"
                    " server kept it alive without finishing it)",
                )
            yield piece

    def unwatch(self) -> None:
        if self._key is not None:
            stream_watch.WATCH.unwatch(self._key)
            self._key = None

    def close(self) -> None:
        # Unwatched before the inner close: that gives a connection read to its end back to
        # the pool, where another call may take it before ``read_stream`` returns (the HTTP
        # client closes a response read to its end inside the read).
        self.unwatch()
        self._inner.close()


def _cancelled() -> ModelError:
    return ModelError("cancelled", "the run was stopped while the model's answer streamed in")
