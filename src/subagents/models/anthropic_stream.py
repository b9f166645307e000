"""One streamed Messages API call: the SDK's events read, their pieces handed to a sink.

Why apart from ``anthropic.py``: what the stream's events mean (which block a delta belongs
to, when a stream is whole) is its own concern; the client, the retries and the mapping of
errors stay there. The SDK's ``MessageStream`` accumulates the message as the events come
(``get_final_message``); its JSON form is decoded by ``anthropic_wire.parse_response``, the
very decoding a non-streamed body gets, so a streamed turn is recorded exactly as the same
turn answered in one body would be.
"""

from __future__ import annotations

from typing import Any

import msgspec

from subagents.models.anthropic_wire import ParsedResponse, parse_response
from subagents.models.base import ModelError, StreamSink
from subagents.models.retry import TransientError


def read_stream(stream: Any, sink: StreamSink | None) -> ParsedResponse:
    """Read ``stream`` (an entered ``anthropic.lib.streaming.MessageStream``) to its end,
    handing each text and tool-input delta to ``sink``; the whole message, decoded.

    A stream that ends without its ``message_stop`` (the connection closed between two
    events) is a ``TransientError``: the turn is not whole, and is asked for again."""
    kind_of_body = stream.response.headers.get("content-type", "")
    if not kind_of_body.startswith("text/event-stream"):
        body = stream.response.read()
        raise ModelError(
            "malformed_response",
            f"expected an event stream, got {kind_of_body or 'no content-type'}: "
            f"{body[:200].decode('utf-8', errors='replace')!r}",
        )
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
