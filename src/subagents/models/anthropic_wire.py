"""Our conversation Structs to the Messages API's JSON and back.

Why separate from the client: this is pure data conversion, testable without a server, and
the one place that knows the wire shape (cache_control placement, tool_result ordering, which
response fields we trust). The response is decoded by msgspec from the raw body rather than
through the SDK's loosely validated models, so a malformed body is caught here with a message
naming what was wrong instead of surfacing later as a missing attribute.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from subagents.messages import (
    ChatMessage,
    ContentBlock,
    ModelRequest,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from subagents.models.base import ModelError

EPHEMERAL: dict[str, str] = {"type": "ephemeral"}


def system_param(system: str) -> list[dict[str, Any]] | None:
    """The system prompt as one cached text block (None when there is no system prompt)."""
    if not system:
        return None
    return [{"type": "text", "text": system, "cache_control": dict(EPHEMERAL)}]


def tools_param(request: ModelRequest) -> list[dict[str, Any]] | None:
    """The tools, with a cache breakpoint on the last one (caches every tool definition)."""
    if not request.tools:
        return None
    tools: list[dict[str, Any]] = [
        {"name": t.name, "description": t.description, "input_schema": t.input_schema}
        for t in request.tools
    ]
    tools[-1]["cache_control"] = dict(EPHEMERAL)
    return tools


def block_param(block: ContentBlock) -> dict[str, Any]:
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text}
    if isinstance(block, ToolUseBlock):
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    content: str | list[dict[str, Any]] = block.content
    if block.attachments:  # text, then each image/document: the API's content blocks
        content = [{"type": "text", "text": block.content or "(attached)"}]
        content += [
            {
                "type": a.kind,
                "source": {"type": "base64", "media_type": a.media_type, "data": a.data},
            }
            for a in block.attachments
        ]
    return {
        "type": "tool_result",
        "tool_use_id": block.tool_use_id,
        "content": content,
        "is_error": block.is_error,
    }


def message_param(message: ChatMessage) -> dict[str, Any]:
    """One message. In a user message every tool_result goes before any text (API rule).

    Empty text blocks are dropped when the message has other content (the API refuses them).
    """
    blocks = list(message.content)
    if message.role == "user":
        blocks.sort(key=lambda b: 0 if isinstance(b, ToolResultBlock) else 1)  # stable
    kept = [b for b in blocks if not (isinstance(b, TextBlock) and not b.text)]
    if not kept:
        kept = blocks
    return {"role": message.role, "content": [block_param(b) for b in kept]}


def messages_param(messages: tuple[ChatMessage, ...]) -> list[dict[str, Any]]:
    return [message_param(m) for m in messages]


# ---------------------------------------------------------------------------------------------
# Responses
# ---------------------------------------------------------------------------------------------


Count = Annotated[int, msgspec.Meta(ge=0)]
"""A count of tokens: a negative one (a broken server, a proxy's bug) is a malformed
response, not spend taken back. It was taken: a run on a token budget was credited with it,
and its record showed ``-105`` tokens and a negative cost (session 28)."""


class WireUsage(msgspec.Struct, frozen=True):
    input_tokens: Count = 0
    output_tokens: Count = 0
    cache_creation_input_tokens: Count | None = None
    cache_read_input_tokens: Count | None = None


class WireMessage(msgspec.Struct, frozen=True):
    """The fields of a Messages API response we rely on; others are ignored."""

    content: list[dict[str, Any]]
    stop_reason: str | None
    usage: WireUsage
    model: str = ""
    role: str = "assistant"
    type: str = "message"


class ParsedResponse(msgspec.Struct, frozen=True):
    """A decoded response: our blocks, the raw blocks (to send back on pause_turn), the rest."""

    blocks: tuple[ContentBlock, ...]
    raw_content: tuple[dict[str, Any], ...]
    stop_reason: str
    usage: WireUsage
    model: str


def parse_response(body: bytes) -> ParsedResponse:
    """Decode a response body; anything we cannot trust is a ``malformed_response`` error."""
    try:
        wire = msgspec.json.decode(body, type=WireMessage)
    except msgspec.ValidationError as exc:
        raise ModelError("malformed_response", f"unexpected response shape: {exc}") from None
    except msgspec.DecodeError as exc:
        raise ModelError(
            "malformed_response", f"response body is not JSON ({exc}): {_preview(body)}"
        ) from None
    if wire.type != "message" or wire.role != "assistant":
        raise ModelError(
            "malformed_response",
            f"expected an assistant message, got type={wire.type!r} role={wire.role!r}",
        )
    if wire.stop_reason is None:
        raise ModelError("malformed_response", "response has no stop_reason")
    blocks: list[ContentBlock] = []
    for index, raw in enumerate(wire.content):
        block = _block(raw, index)
        if block is not None:
            blocks.append(block)
    return ParsedResponse(
        blocks=tuple(blocks),
        raw_content=tuple(wire.content),
        stop_reason=wire.stop_reason,
        usage=wire.usage,
        model=wire.model,
    )


def _block(raw: dict[str, Any], index: int) -> ContentBlock | None:
    """Our block for a text or tool_use block; None for other kinds (thinking, server tools)."""
    kind = raw.get("type")
    where = f"content[{index}]"
    if kind == "text":
        text = raw.get("text")
        if not isinstance(text, str):
            raise ModelError("malformed_response", f"{where}: text block without a string `text`")
        return TextBlock(text=text)
    if kind == "tool_use":
        block_id, name, tool_input = raw.get("id"), raw.get("name"), raw.get("input")
        if not isinstance(block_id, str) or not block_id:
            raise ModelError("malformed_response", f"{where}: tool_use block without an `id`")
        if not isinstance(name, str) or not name:
            raise ModelError("malformed_response", f"{where}: tool_use block without a `name`")
        if not isinstance(tool_input, dict):
            raise ModelError(
                "malformed_response",
                f"{where}: tool_use {name!r} has `input` of type {type(tool_input).__name__}, "
                "expected an object",
            )
        return ToolUseBlock(id=block_id, name=name, input=tool_input)
    if not isinstance(kind, str):
        raise ModelError("malformed_response", f"{where}: block without a `type`")
    return None


def _preview(body: bytes, limit: int = 200) -> str:
    text = body[:limit].decode("utf-8", errors="replace")
    return repr(text) + ("..." if len(body) > limit else "")
