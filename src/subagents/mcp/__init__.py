"""MCP servers for LLM agents: Claude Code's configuration shapes, a hub that starts servers
lazily on one event loop thread and shares them across a runtime's runs, and their tools
named ``mcp__<server>__<tool>``.

Layering: beside ``tools/`` (below ``behaviour/``), above ``definitions/`` and ``models/``.
``config``, ``selection`` and ``results`` are pure; ``connection`` and ``hub`` hold the one
event loop thread. The ``mcp`` SDK is imported only when a server is started, so parsing
configurations works without it installed.
"""

from subagents.mcp.config import (
    McpConfigError,
    NamedServer,
    RemoteServer,
    StdioServer,
    parse_server,
    parse_servers,
)
from subagents.mcp.connection import McpServerError
from subagents.mcp.hub import McpCallError, McpCallResult, McpHub, RunMcp
from subagents.mcp.selection import McpTool, exposed_name

__all__ = [
    "McpCallError",
    "McpCallResult",
    "McpConfigError",
    "McpHub",
    "McpServerError",
    "McpTool",
    "NamedServer",
    "RemoteServer",
    "RunMcp",
    "StdioServer",
    "exposed_name",
    "parse_server",
    "parse_servers",
]
