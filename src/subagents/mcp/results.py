"""An MCP ``CallToolResult`` as the text a model reads (pure).

Text blocks are joined; other blocks (images, audio, resources, links) are described in one
line each, since a tool result here is text; structured content is shown as JSON when the
server sent no text. Output longer than ``OUTPUT_LIMIT`` characters is cut with a note, as
Claude Code caps MCP output so one tool cannot fill the context window.
"""

from __future__ import annotations

from typing import Any

import msgspec

from subagents.tools.user_results import cut

OUTPUT_LIMIT = 100_000
"""About 25,000 tokens: Claude Code's default cap on one MCP tool's output."""


def render_content(blocks: list[Any], structured: Any = None) -> str:
    """The content blocks of a result as text."""
    parts: list[str] = []
    for block in blocks:
        kind = getattr(block, "type", None)
        if kind == "text":
            parts.append(str(block.text))
        elif kind in ("image", "audio"):
            size = len(getattr(block, "data", "") or "") * 3 // 4
            parts.append(f"[{kind}: {getattr(block, 'mime_type', '?')}, about {size} bytes]")
        elif kind == "resource":
            resource = block.resource
            text = getattr(resource, "text", None)
            if text is not None:
                parts.append(f"[resource {resource.uri}]\n{text}")
            else:
                parts.append(
                    f"[resource {resource.uri}: {getattr(resource, 'mime_type', None) or 'binary'}]"
                )
        elif kind == "resource_link":
            parts.append(f"[resource link {block.uri}: {getattr(block, 'name', '')}]")
        else:
            parts.append(f"[{kind or type(block).__name__} content]")
    if not parts and structured is not None:
        parts.append(msgspec.json.encode(structured).decode())
    return cap("\n".join(parts))


def cap(text: str, limit: int = OUTPUT_LIMIT) -> str:
    """``text`` cut at ``limit`` characters with the note a user tool's answer gets
    (``tools/user_results.py``: one wording for both)."""
    return cut(text, limit)
