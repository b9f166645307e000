"""A user's tool's answer held to what one tool result may be.

The built-in tools cut their own output (Bash and Grep at 30,000 characters, a file read at
2,000 lines) and an MCP server's result is cut at ``mcp/results.py``'s 100,000 characters, as
Claude Code caps MCP output. A tool given to the runtime in code (``Runtime(tools=[...])``)
had no cap: a function returning 100 MB was journaled, kept in the conversation and sent to
the model whole at every later step, until the model API refused the request and the run
failed far from its cause. Its text is now cut at the same 100,000 characters (about 25,000
tokens), with a note the model reads, saying how much there was and asking for less. Its
attachments (images, PDFs: base64 in the request) are held to what the built-in Read gives
(``tools/read_media.py``: an image 3,750,000 bytes, a PDF 20,000,000) and to 20,000,000 bytes
together; one over is left out, and the text says which and why.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import msgspec

from subagents.messages.conversation import Attachment
from subagents.tools.base import Runner, Tool, ToolOutput, ToolResult
from subagents.tools.context import ToolContext
from subagents.tools.read_media import MAX_IMAGE_BYTES, MAX_PDF_BYTES

USER_RESULT_LIMIT = 100_000
"""Characters of a user tool's answer the model is shown: MCP's cap (``mcp/results.py``)."""

ATTACHMENTS_LIMIT = MAX_PDF_BYTES
"""Bytes of a user tool's attachments together (each also within its kind's limit)."""

_KIND_LIMIT = {"image": MAX_IMAGE_BYTES, "document": MAX_PDF_BYTES}


def cut(text: str, limit: int = USER_RESULT_LIMIT) -> str:
    """``text``, or its first ``limit`` characters and a note saying what was left out."""
    if len(text) <= limit:
        return text
    return (
        text[:limit]
        + f"\n\n[output cut: {len(text):,} characters, the first {limit:,} shown; ask the tool"
        " for less, e.g. with a narrower query or a page]"
    )


class CappedRunner:
    """A user tool's runner whose text answer is ``cut``: a class, not a closure, so a tool
    made of module-level parts still pickles."""

    __slots__ = ("runner",)

    def __init__(self, runner: Runner) -> None:
        self.runner = runner

    def __call__(self, arguments: Mapping[str, Any], ctx: ToolContext | None) -> ToolOutput:
        out = self.runner(arguments, ctx)
        if isinstance(out, ToolResult):
            kept, notes = held_attachments(out.attachments)
            if len(out.content) <= USER_RESULT_LIMIT and not notes:
                return out
            content = cut(out.content) + "".join(f"\n\n[{note}]" for note in notes)
            return msgspec.structs.replace(out, content=content, attachments=kept)
        if isinstance(out, str):
            return cut(out)
        return out


def held_attachments(
    attachments: tuple[Attachment, ...],
) -> tuple[tuple[Attachment, ...], list[str]]:
    """The attachments within their kind's limit and ``ATTACHMENTS_LIMIT`` together, in
    order, and a note for each left out."""
    kept: list[Attachment] = []
    notes: list[str] = []
    total = 0
    for number, attachment in enumerate(attachments, 1):
        size = len(attachment.data) * 3 // 4  # base64: about 3 bytes per 4 characters
        limit = _KIND_LIMIT.get(attachment.kind, MAX_IMAGE_BYTES)
        shown = f"attachment {number} ({attachment.media_type}, about {size:,} bytes) left out"
        if size > limit:
            notes.append(f"{shown}: over the {limit:,} bytes one {attachment.kind} may be")
        elif total + size > ATTACHMENTS_LIMIT:
            notes.append(
                f"{shown}: over the {ATTACHMENTS_LIMIT:,} bytes of a tool's attachments together"
            )
        else:
            kept.append(attachment)
            total += size
    return tuple(kept), notes


def capped(tool: Tool) -> Tool:
    """``tool`` with its answers cut at ``USER_RESULT_LIMIT`` characters."""
    if isinstance(tool.run, CappedRunner):
        return tool
    return dataclasses.replace(tool, run=CappedRunner(tool.run))
