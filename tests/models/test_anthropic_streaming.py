"""AnthropicModel streams: the real SDK against the local server speaking SSE as the API does.

What is proved: the sink is told every text and tool-input piece in order; a streamed turn
is the same ``ModelResponse`` as the same turn with nobody listening; a stream that breaks
half way (an ``error`` event, a cut connection, an end without ``message_stop``) is retried
whole, and the sink is told the failed attempt's pieces are void before the retry's come.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from fake_messages_api import (
    FakeMessagesAPI,
    message,
    stream_events,
    streamed,
    text_message,
    tool_use_message,
)
from subagents.messages import ChatMessage, ModelRequest, TextBlock, ToolSchema, ToolUseBlock
from subagents.models import AnthropicModel, ModelError, RetryPolicy
from subagents.models.base import StreamingModel

FAST = RetryPolicy(max_attempts=3, base_wait=0.01, max_wait=0.05)
READ = ToolSchema(
    name="read_file",
    description="Read a file.",
    input_schema={"type": "object", "properties": {"path": {"type": "string"}}},
)
TEXT = "The catalog is read far more often than it is written, so cache it."


class Pieces:
    """A sink that keeps what it is told, in order (a plain recorder, not the runtime's)."""

    def __init__(self) -> None:
        self.told: list[tuple[str, ...]] = []

    def text(self, text: str) -> None:
        self.told.append(("text", text))

    def tool_input(self, tool: str, partial_json: str) -> None:
        self.told.append(("tool_input", tool, partial_json))

    def void(self) -> None:
        self.told.append(("void",))

    def since_last_void(self) -> list[tuple[str, ...]]:
        voids = [i for i, t in enumerate(self.told) if t == ("void",)]
        return self.told[voids[-1] + 1 :] if voids else list(self.told)


def request() -> ModelRequest:
    return ModelRequest(
        model="sonnet",
        system="You are the lead.",
        messages=(ChatMessage(role="user", content=(TextBlock(text="go"),)),),
        tools=(READ,),
        agent="lead",
        run_id="run1",
    )


@pytest.fixture
def api() -> Iterator[FakeMessagesAPI]:
    with FakeMessagesAPI() as server:
        yield server


@pytest.fixture
def model(api: FakeMessagesAPI) -> Iterator[AnthropicModel]:
    with AnthropicModel(api_key="test-key", base_url=api.url, retry=FAST) as m:
        yield m


def tool_turn() -> dict[str, Any]:
    return tool_use_message(
        [("toolu_1", "read_file", {"path": "src/catalog.py", "lines": [1, 2, 3]})], text=TEXT
    )


def test_is_a_streaming_model_and_asks_for_a_stream(
    api: FakeMessagesAPI, model: AnthropicModel
) -> None:
    assert isinstance(model, StreamingModel)
    api.add(text_message("hi"))
    model.complete(request())
    assert api.requests[0].body["stream"] is True


def test_every_piece_reaches_the_sink_in_order(api: FakeMessagesAPI, model: AnthropicModel) -> None:
    api.chunk = 5
    api.add(tool_turn())
    sink = Pieces()
    response = model.stream(request(), sink)
    texts = [t[1] for t in sink.told if t[0] == "text"]
    inputs = [t[2] for t in sink.told if t[0] == "tool_input"]
    assert "".join(texts) == TEXT
    assert len(texts) == -(-len(TEXT) // 5)  # ceil: every 5-character piece, none merged
    assert {t[1] for t in sink.told if t[0] == "tool_input"} == {"read_file"}
    assert json.loads("".join(inputs)) == {"path": "src/catalog.py", "lines": [1, 2, 3]}
    assert ("void",) not in sink.told
    assert response.content == (
        TextBlock(text=TEXT),
        ToolUseBlock(
            id="toolu_1", name="read_file", input={"path": "src/catalog.py", "lines": [1, 2, 3]}
        ),
    )


def test_a_streamed_turn_is_the_turn_answered_whole(
    api: FakeMessagesAPI, model: AnthropicModel
) -> None:
    """Streaming changes nothing of what is returned (so nothing of what a run records)."""
    turn = tool_turn()
    api.add(turn, turn)
    quiet = model.complete(request())
    loud = model.stream(request(), Pieces())
    assert loud == quiet
    assert quiet.stop_reason == "tool_use" and quiet.usage.output_tokens == 5


@pytest.mark.parametrize(
    "broken",
    [
        {"error_after": 6},  # an overloaded_error event half way
        {"cut_after": 6},  # the connection cut inside the chunked body
        {"end_after": 6},  # a clean end, but no message_stop
    ],
    ids=["error-event", "cut", "no-message-stop"],
)
def test_a_stream_broken_half_way_is_retried_whole(
    api: FakeMessagesAPI, model: AnthropicModel, broken: dict[str, int]
) -> None:
    api.chunk = 4
    api.add(streamed(text_message(TEXT), chunk=4, **broken), text_message(TEXT))
    sink = Pieces()
    response = model.stream(request(), sink)
    assert response.content == (TextBlock(text=TEXT),)
    assert len(api.requests) == 2
    # the first attempt showed something, then was declared void once, before the retry's
    voids = [i for i, t in enumerate(sink.told) if t == ("void",)]
    assert len(voids) == 1 and voids[0] > 0
    assert "".join(t[1] for t in sink.since_last_void()) == TEXT


def test_an_invalid_request_error_event_is_not_retried(
    api: FakeMessagesAPI, model: AnthropicModel
) -> None:
    api.add(streamed(text_message(TEXT), error_after=4, error_type="invalid_request_error"))
    with pytest.raises(ModelError) as info:
        model.stream(request(), Pieces())
    assert info.value.kind == "bad_request"
    assert "invalid_request_error event in the response stream" in info.value.message
    assert len(api.requests) == 1


def test_streams_broken_every_time_give_up_as_transient(
    api: FakeMessagesAPI, model: AnthropicModel
) -> None:
    api.add(*[streamed(text_message(TEXT), error_after=5) for _ in range(3)])
    sink = Pieces()
    with pytest.raises(ModelError) as info:
        model.stream(request(), sink)
    assert info.value.kind == "overloaded" and info.value.transient
    assert "gave up after 3 attempt(s)" in info.value.message
    assert sink.told.count(("void",)) == 2  # before each of the two retries


def test_a_tool_input_that_is_not_an_object_is_malformed(
    api: FakeMessagesAPI, model: AnthropicModel
) -> None:
    api.add(message([{"type": "tool_use", "id": "t", "name": "x", "input": "str"}]))
    with pytest.raises(ModelError) as info:
        model.stream(request(), Pieces())
    assert info.value.kind == "malformed_response"
    assert len(api.requests) == 1


def test_stream_events_are_the_api_s_shape() -> None:
    """The fake server's events, in the API's order (what the SDK is fed)."""
    names = [name for name, _ in stream_events(text_message("abcdefgh"), chunk=3)]
    assert names == [
        "message_start",
        "ping",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
