"""Conversation: the Model protocol's request and response, and the content blocks of a
conversation in the Messages API's shape (kept in checkpoints, handed to models).
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from subagents.messages.records import Usage


class TextBlock(msgspec.Struct, frozen=True, tag="text", tag_field="type"):
    text: str


class ToolUseBlock(msgspec.Struct, frozen=True, tag="tool_use", tag_field="type"):
    id: str
    name: str
    input: dict[str, Any]


AttachmentKind = Literal["image", "document"]
"""What an ``Attachment`` holds: the Messages API's content type for it."""


class Attachment(msgspec.Struct, frozen=True, omit_defaults=True):
    """An image or a PDF a tool shows the model beside its text (Read of a PNG, a notebook's
    plots): the Messages API's ``image``/``document`` content of a tool result, base64."""

    kind: AttachmentKind
    media_type: str
    """``image/png``, ``image/jpeg``, ``image/gif``, ``image/webp`` or ``application/pdf``."""
    data: str
    """The bytes, base64-encoded."""


class ToolResultBlock(
    msgspec.Struct, frozen=True, tag="tool_result", tag_field="type", omit_defaults=True
):
    tool_use_id: str
    content: str
    is_error: bool = False
    attachments: tuple[Attachment, ...] = ()
    """Images or documents shown after ``content`` (models that cannot see them get the text)."""


ContentBlock = TextBlock | ToolUseBlock | ToolResultBlock


class ChatMessage(msgspec.Struct, frozen=True):
    """One message of a conversation, in the Messages API's shape."""

    role: Literal["user", "assistant"]
    content: tuple[ContentBlock, ...]

    @property
    def text(self) -> str:
        """The text blocks of this message, joined."""
        return "\n".join(b.text for b in self.content if isinstance(b, TextBlock))


class ToolSchema(msgspec.Struct, frozen=True):
    """A tool as a model sees it: name, description and a JSON schema of its input."""

    name: str
    description: str
    input_schema: dict[str, Any]


class ModelRequest(msgspec.Struct, frozen=True, kw_only=True):
    """What an agent asks of a model for one step.

    ``agent`` and ``run_id`` are not sent to any API; they let offline backends pick a script
    and let backends bind log lines to the run.
    """

    model: str
    system: str
    messages: tuple[ChatMessage, ...]
    tools: tuple[ToolSchema, ...] = ()
    max_tokens: int = 4096
    agent: str = ""
    run_id: str = ""


StopReason = Literal[
    "end_turn",
    "tool_use",
    "max_tokens",
    "stop_sequence",
    "pause_turn",
    "refusal",
    "model_context_window_exceeded",
]


class ModelResponse(msgspec.Struct, frozen=True, kw_only=True):
    """One model turn: content blocks, why it stopped, what it cost."""

    content: tuple[ContentBlock, ...]
    stop_reason: str
    usage: Usage = Usage()
    model: str = ""

    # (plain loops, not comprehensions: each is read on every model call of every run, and
    # a comprehension or generator costs a frame, a generator one resumed per block)
    @property
    def text(self) -> str:
        texts: list[str] = []
        for block in self.content:
            if isinstance(block, TextBlock):
                texts.append(block.text)
        return texts[0] if len(texts) == 1 else "\n".join(texts)

    @property
    def tool_uses(self) -> tuple[ToolUseBlock, ...]:
        uses: list[ToolUseBlock] = []
        for block in self.content:
            if isinstance(block, ToolUseBlock):
                uses.append(block)
        return tuple(uses)
