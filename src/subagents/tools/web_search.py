"""WebSearch: Claude Code's web search tool, over a search provider the runtime's owner gives.

No provider is built in (a search API needs an account and a key): ``web_search_tool(provider)``
makes the tool, given to the runtime like any user tool, ``Runtime(tools=[web_search_tool(p)])``.
A provider is any object with ``search(query, allowed_domains=..., blocked_domains=...)``
returning ``SearchResult``s (title, url, snippet). The tool checks the input as Claude Code's
does, keeps the domain filters itself too (a provider that ignores them cannot widen them), and
answers in Claude Code's shape: the query, then one linked line per result.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Protocol

import msgspec

from subagents.tools.base import Tool, ToolError, decode_input, struct_schema

NAME = "WebSearch"


class SearchResult(msgspec.Struct, frozen=True):
    title: str
    url: str
    snippet: str = ""


class SearchProvider(Protocol):
    """What answers WebSearch: a search engine's API behind one method."""

    def search(
        self, query: str, *, allowed_domains: tuple[str, ...], blocked_domains: tuple[str, ...]
    ) -> Sequence[SearchResult]: ...


class WebSearchInput(msgspec.Struct):
    query: Annotated[str, msgspec.Meta(min_length=2, description="The search query to use")]
    allowed_domains: (
        Annotated[list[str], msgspec.Meta(description="Only include results from these domains")]
        | None
    ) = None
    blocked_domains: (
        Annotated[list[str], msgspec.Meta(description="Never include results from these domains")]
        | None
    ) = None


DESCRIPTION = """Searches the web and uses the results to inform responses.
- Provides up-to-date information for current events and recent data
- Returns search result information formatted as search result blocks, with links
- Domain filtering is supported to include or block specific websites"""


def web_search_tool(provider: SearchProvider, *, max_results: int = 10) -> Tool:
    """Claude Code's WebSearch, answered by ``provider``."""

    def run(arguments: Mapping[str, Any], ctx: object) -> str:
        args = decode_input(NAME, WebSearchInput, arguments)
        allowed = tuple(d.lower() for d in args.allowed_domains or ())
        blocked = tuple(d.lower() for d in args.blocked_domains or ())
        if allowed and blocked:
            raise ToolError("give allowed_domains or blocked_domains, not both")
        try:
            found = provider.search(args.query, allowed_domains=allowed, blocked_domains=blocked)
        except Exception as exc:
            raise ToolError(f"the search provider failed ({type(exc).__name__}: {exc})") from None
        kept = [r for r in found if _passes(r.url, allowed, blocked)][:max_results]
        lines = [f'Web search results for query: "{args.query}"', ""]
        if not kept:
            lines.append("No results found.")
        for result in kept:
            lines.append(f"- [{result.title}]({result.url})")
            if result.snippet:
                lines.append(f"  {' '.join(result.snippet.split())}")
        return "\n".join(lines)

    return Tool(
        name=NAME,
        starts_processes=False,  # its provider answers in the runtime's process
        description=DESCRIPTION,
        input_schema=struct_schema(WebSearchInput),
        run=run,
        read_only=True,
        idempotent=True,
        params=WebSearchInput,
    )


def _passes(url: str, allowed: tuple[str, ...], blocked: tuple[str, ...]) -> bool:
    host = (urllib.parse.urlsplit(url).hostname or "").lower()

    def under(domain: str) -> bool:
        return host == domain or host.endswith("." + domain)

    if allowed and not any(under(d) for d in allowed):
        return False
    return not any(under(d) for d in blocked)
