"""The offline model streams a turn scripted with ``stream: N``: N pieces of its text and of
each tool call's input, the same response as unstreamed, and half of them when it fails."""

from __future__ import annotations

import msgspec
import pytest

from subagents.messages import ChatMessage, ModelRequest, TextBlock
from subagents.models import ModelError, ScriptedModel
from subagents.models.base import StreamingModel


class Pieces:
    def __init__(self) -> None:
        self.told: list[tuple[str, ...]] = []

    def text(self, text: str) -> None:
        self.told.append(("text", text))

    def tool_input(self, tool: str, partial_json: str) -> None:
        self.told.append(("tool_input", tool, partial_json))

    def void(self) -> None:
        self.told.append(("void",))


def request(agent: str = "writer", run_id: str = "r1") -> ModelRequest:
    return ModelRequest(
        model="",
        system="",
        messages=(ChatMessage(role="user", content=(TextBlock(text="go"),)),),
        agent=agent,
        run_id=run_id,
    )


TEXT = "twelve chars" * 2  # 24 characters


def test_a_streamed_turn_is_told_in_pieces_and_returned_whole() -> None:
    model = ScriptedModel(
        {
            "writer": [
                {
                    "text": TEXT,
                    "tool_calls": [{"name": "Read", "input": {"p": "abcd"}}],
                    "stream": 4,
                }
            ]
        }
    )
    assert isinstance(model, StreamingModel)
    sink = Pieces()
    streamed = model.stream(request(), sink)
    texts = [t[1] for t in sink.told if t[0] == "text"]
    inputs = [t[2] for t in sink.told if t[0] == "tool_input"]
    assert texts == [TEXT[i : i + 6] for i in range(0, 24, 6)]
    assert msgspec.json.decode("".join(inputs)) == {"p": "abcd"} and len(inputs) == 4
    whole = model.complete(request())
    assert (whole.content, whole.stop_reason, whole.usage) == (
        streamed.content,
        streamed.stop_reason,
        streamed.usage,
    )


def test_a_turn_without_stream_tells_nothing() -> None:
    model = ScriptedModel({"writer": [TEXT]})
    sink = Pieces()
    assert model.stream(request(), sink).content == (TextBlock(text=TEXT),)
    assert sink.told == []


def test_a_failing_streamed_turn_tells_half_then_fails() -> None:
    error = {"kind": "overloaded", "message": "busy", "transient": True}
    model = ScriptedModel(
        {"writer": [{"text": TEXT, "stream": 4, "error": error, "fail_times": 1}]}
    )
    sink = Pieces()
    with pytest.raises(ModelError) as info:
        model.stream(request(), sink)
    assert info.value.kind == "overloaded"
    assert [t[1] for t in sink.told] == [TEXT[:6], TEXT[6:12]]
    again = Pieces()
    assert model.stream(request(), again).content == (TextBlock(text=TEXT),)
    assert "".join(t[1] for t in again.told) == TEXT


def test_stream_must_be_positive() -> None:
    with pytest.raises(Exception, match="`stream` must be >= 1"):
        ScriptedModel({"writer": [{"text": "x", "stream": 0}]})
