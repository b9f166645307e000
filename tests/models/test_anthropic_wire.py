"""Conversion between our Structs and the Messages API's JSON, without a server."""

from __future__ import annotations

import json

import pytest

from subagents.messages import (
    ChatMessage,
    ModelRequest,
    TextBlock,
    ToolResultBlock,
    ToolSchema,
    ToolUseBlock,
)
from subagents.models import ModelError
from subagents.models.anthropic_wire import (
    message_param,
    parse_response,
    system_param,
    tools_param,
)


def test_user_message_puts_tool_results_first_keeping_their_order() -> None:
    msg = ChatMessage(
        role="user",
        content=(
            TextBlock(text="mail"),
            ToolResultBlock(tool_use_id="b", content="2"),
            TextBlock(text="more"),
            ToolResultBlock(tool_use_id="a", content="1", is_error=True),
        ),
    )
    assert message_param(msg) == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "b", "content": "2", "is_error": False},
            {"type": "tool_result", "tool_use_id": "a", "content": "1", "is_error": True},
            {"type": "text", "text": "mail"},
            {"type": "text", "text": "more"},
        ],
    }


def test_assistant_message_keeps_order_and_drops_empty_text() -> None:
    msg = ChatMessage(
        role="assistant",
        content=(TextBlock(text=""), ToolUseBlock(id="t1", name="x", input={"k": [1]})),
    )
    assert message_param(msg)["content"] == [
        {"type": "tool_use", "id": "t1", "name": "x", "input": {"k": [1]}}
    ]
    only_empty = ChatMessage(role="assistant", content=(TextBlock(text=""),))
    assert message_param(only_empty)["content"] == [{"type": "text", "text": ""}]


def test_cache_control_on_system_and_last_tool_only() -> None:
    assert system_param("") is None
    assert system_param("sys") == [
        {"type": "text", "text": "sys", "cache_control": {"type": "ephemeral"}}
    ]
    tools = tuple(ToolSchema(name=n, description=n, input_schema={}) for n in ("a", "b", "c"))
    req = ModelRequest(model="m", system="", messages=(), tools=tools)
    params = tools_param(req)
    assert params is not None
    assert [("cache_control" in t) for t in params] == [False, False, True]
    assert tools_param(ModelRequest(model="m", system="", messages=())) is None


def body(**fields: object) -> bytes:
    base: dict[str, object] = {
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-5-5",
        "content": [{"type": "text", "text": "hi"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 3, "output_tokens": 4},
    }
    base.update(fields)
    return json.dumps(base).encode()


def test_parse_keeps_text_and_tool_use_and_raw_blocks() -> None:
    content = [
        {"type": "thinking", "thinking": "hmm", "signature": "s"},
        {"type": "text", "text": "a"},
        {"type": "tool_use", "id": "t", "name": "n", "input": {"x": 1}},
    ]
    parsed = parse_response(body(content=content, stop_reason="tool_use", extra_field=1))
    assert parsed.blocks == (TextBlock(text="a"), ToolUseBlock(id="t", name="n", input={"x": 1}))
    assert list(parsed.raw_content) == content
    assert parsed.stop_reason == "tool_use"
    assert parsed.usage.input_tokens == 3
    assert parsed.usage.cache_read_input_tokens is None
    assert parsed.model == "claude-sonnet-5-5"


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        (b"", "not JSON"),
        (b"<html>502 Bad Gateway</html>", "502 Bad Gateway"),
        (body(content=None), "content"),
        (body(usage="x"), "usage"),
        (body(stop_reason=None), "no stop_reason"),
        (body(type="error"), "type='error'"),
        (body(content=[{"type": "text"}]), "content[0]: text block"),
        (body(content=[{"type": "tool_use", "name": "n", "input": {}}]), "content[0]: tool_use"),
        (body(content=[{"type": "tool_use", "id": "t", "input": {}}]), "`name`"),
        (body(content=[{"type": "tool_use", "id": "t", "name": "n", "input": 1}]), "`input`"),
        (body(content=[{"text": "no type"}]), "without a `type`"),
    ],
)
def test_malformed_bodies(raw: bytes, fragment: str) -> None:
    with pytest.raises(ModelError) as info:
        parse_response(raw)
    assert info.value.kind == "malformed_response"
    assert fragment in info.value.message
