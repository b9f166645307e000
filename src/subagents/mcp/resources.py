"""Claude Code's MCP resource tools: ``ListMcpResourcesTool`` and ``ReadMcpResourceTool``.

A server may offer resources (files, records, documents, by URI) besides tools. A run whose
definition uses MCP servers gets these two tools (unless its ``tools`` leaves them out) for the
servers started for it: a list of
every resource (``server``, ``uri``, ``name``, ``mimeType``, ``description``) and the
contents of one (text as it is, an image as an image the model sees, other binary content
described). Both only read: allowed in plan mode, never asked; bounded like a tool call
(the run's stop and deadline, the per-call timeout).
"""

from __future__ import annotations

import base64
import functools
from collections.abc import Mapping
from typing import Annotated, Any

import msgspec

from subagents.mcp.connection import McpServerError
from subagents.mcp.hub import RESOURCE_TOOLS, McpCallError, McpHub, RunMcp
from subagents.mcp.results import cap
from subagents.messages import Attachment
from subagents.tools.base import Tool, ToolError, ToolResult, decode_input, struct_schema
from subagents.tools.context import ToolContext

LIST, READ = RESOURCE_TOOLS
IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})


class ListInput(msgspec.Struct):
    server: (
        Annotated[str, msgspec.Meta(description="Optional server name to filter resources by")]
        | None
    ) = None


class ReadInput(msgspec.Struct):
    server: Annotated[str, msgspec.Meta(description="The MCP server name")]
    uri: Annotated[str, msgspec.Meta(description="The resource URI to read")]


def resource_tools(hub: McpHub, run: RunMcp) -> dict[str, Tool]:
    """The two tools for ``run`` (those its definition allows), or none when no server was
    started for it."""
    if not run.started or not run.resource_tools:
        return {}
    servers = ", ".join(run.started)
    tools = {
        LIST: Tool(
            name=LIST,
            description="List the resources (files, documents, records) of the MCP servers"
            f" ({servers}); each with its server and URI, for ReadMcpResourceTool.",
            input_schema=struct_schema(ListInput),
            run=functools.partial(_list_resources, hub, run),
            read_only=True,
            idempotent=True,
            params=ListInput,
        ),
        READ: Tool(
            name=READ,
            description=f"Read one resource of an MCP server ({servers}) by its server and URI.",
            input_schema=struct_schema(ReadInput),
            run=functools.partial(_read_resource, hub, run),
            read_only=True,
            idempotent=True,
            params=ReadInput,
        ),
    }
    return {name: tool for name, tool in tools.items() if name in run.resource_tools}


def _bounded(ctx: ToolContext | None) -> dict[str, Any]:
    """A call's deadline and cancel signal, for the hub's ask of a server."""
    return {
        "deadline": ctx.deadline if ctx is not None else None,
        "cancel": ctx.cancel if ctx is not None else None,
    }


def _list_resources(
    hub: McpHub, run: RunMcp, arguments: Mapping[str, Any], ctx: ToolContext | None
) -> str:
    """ListMcpResourcesTool: every resource of the run's servers (or of the one named)."""
    args = decode_input(LIST, ListInput, arguments)
    servers = run.started if args.server is None else (args.server,)
    found: list[dict[str, Any]] = []
    for server in servers:
        try:
            listed = hub.ask_server(
                run, server, lambda c: c.resources(LIST), what=f"listing {server}'s"
                " resources", **_bounded(ctx)
            )  # fmt: skip
        except (McpServerError, McpCallError, LookupError) as exc:
            raise ToolError(str(exc)) from None
        found.extend(_described(server, r) for r in listed)
    if not found:
        return (
            "No resources found. MCP servers may still provide tools even if they have no"
            " resources."
        )
    return cap(msgspec.json.encode(found).decode())


def _read_resource(
    hub: McpHub, run: RunMcp, arguments: Mapping[str, Any], ctx: ToolContext | None
) -> ToolResult:
    """ReadMcpResourceTool: one resource of one of the run's servers, by its URI."""
    args = decode_input(READ, ReadInput, arguments)
    try:
        result = hub.ask_server(
            run, args.server, lambda c: c.read_resource(args.uri, f"reading {args.uri}"),
            what=f"reading {args.uri}", **_bounded(ctx)
        )  # fmt: skip
    except (McpServerError, McpCallError, LookupError) as exc:
        raise ToolError(str(exc)) from None
    except Exception as exc:  # the server refused (an MCPError: unknown resource...)
        raise ToolError(f"MCP server {args.server!r} could not read {args.uri}: {exc}") from None
    return _contents(list(result.contents or ()))


def _described(server: str, resource: Any) -> dict[str, Any]:
    shown: dict[str, Any] = {"server": server, "uri": str(resource.uri), "name": resource.name}
    if resource.mime_type:
        shown["mimeType"] = resource.mime_type
    if resource.description:
        shown["description"] = resource.description
    return shown


def _contents(contents: list[Any]) -> ToolResult:
    """Text as it is; an image attached; other binary content in one line."""
    parts: list[str] = []
    images: list[Attachment] = []
    for item in contents:
        mime = getattr(item, "mime_type", None)
        text = getattr(item, "text", None)
        if text is not None:
            parts.append(str(text))
            continue
        blob = str(getattr(item, "blob", ""))
        if mime in IMAGE_TYPES:
            images.append(Attachment("image", mime, blob))
            parts.append(f"[image {item.uri}: {mime}]")
        else:
            size = len(base64.b64decode(blob, validate=False)) if blob else 0
            parts.append(f"[{item.uri}: {mime or 'binary'}, {size:,} bytes]")
    return ToolResult(cap("\n".join(parts)) or "(empty resource)", attachments=tuple(images))
