"""WebFetch against a real local HTTP server (127.0.0.1 only), its permission rules in a real
runtime, and WebSearch over a provider."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from subagents.definitions.spec import AgentSpec
from subagents.messages import RunStatus, ToolResultBlock
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime
from subagents.tools.base import ToolError
from subagents.tools.builtin import builtin_tools
from subagents.tools.context import ToolContext
from subagents.tools.permissions import Permissions
from subagents.tools.web_search import SearchResult, web_search_tool

from .conftest import WAIT

FETCH = builtin_tools()["WebFetch"]
PAGE = """<html><head><title>T</title><style>body { color: red }</style>
<script>var secret = "do-not-show";</script></head>
<body><h1>Median</h1><p>The <b>median</b> of a list: see <a href="/docs">the docs</a>.</p>
<ul><li>sort it</li><li>take the middle</li></ul></body></html>"""


class Site:
    """A real HTTP server on 127.0.0.1 with a few pages."""

    def __init__(self) -> None:
        self.release = threading.Event()
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/page":
                    self._send(200, "text/html; charset=utf-8", PAGE.encode())
                elif self.path == "/data":
                    self._send(200, "application/json", b'{"answer": 42}')
                elif self.path == "/image":
                    self._send(200, "image/png", b"\x89PNG\r\n\x1a\n")
                elif self.path == "/moved":
                    self._redirect(f"http://127.0.0.1:{site.port}/page")
                elif self.path == "/away":
                    self._redirect(f"http://localhost:{site.port}/page")
                elif self.path == "/hang":
                    site.release.wait(120)
                    self._send(200, "text/plain", b"late")
                else:
                    self._send(404, "text/plain", b"no such page")

            def _send(self, code: int, kind: str, body: bytes) -> None:
                self.send_response(code)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _redirect(self, to: str) -> None:
                self.send_response(302)
                self.send_header("Location", to)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(30)


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    served = Site()
    yield served
    served.close()


def fetch(ctx: ToolContext, url: str, prompt: str = "what is the median?") -> str:
    return FETCH.call({"url": url, "prompt": prompt}, ctx)


def refused(ctx: ToolContext, **arguments: Any) -> str:
    with pytest.raises(ToolError) as caught:
        FETCH.call(arguments, ctx)
    return str(caught.value)


def test_webfetch_turns_a_page_into_markdown(context: ToolContext, site: Site) -> None:
    text = fetch(context, site.url("/page"))
    assert text.startswith(f"Fetched {site.url('/page')} (HTTP 200, text/html, ")
    assert "Answer this from the content below: what is the median?" in text
    assert "# Median" in text
    assert "The **median** of a list: see [the docs](/docs)." in text
    assert "* sort it" in text and "* take the middle" in text
    assert "do-not-show" not in text and "color: red" not in text
    assert fetch(context, site.url("/data")).endswith('{"answer": 42}')


def test_webfetch_follows_a_redirect_on_its_host_and_reports_one_elsewhere(
    context: ToolContext, site: Site
) -> None:
    assert f"Fetched {site.url('/page')}" in fetch(context, site.url("/moved"))
    away = fetch(context, site.url("/away"))
    assert away.startswith("REDIRECT DETECTED")
    assert site.url("/page", host="localhost") in away and "# Median" not in away


def test_webfetch_errors_name_what_went_wrong(context: ToolContext, site: Site) -> None:
    assert "HTTP 404" in refused(context, url=site.url("/nope"), prompt="p")
    assert "is image/png, not a page" in refused(context, url=site.url("/image"), prompt="p")
    assert "must be a full http(s) URL" in refused(context, url="file:///etc/passwd", prompt="p")
    assert "invalid input for WebFetch" in refused(context, url=site.url("/page"))
    assert "failed" in refused(context, url=f"http://127.0.0.1:{_closed_port()}/", prompt="p")


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_webfetch_gives_up_at_the_runs_deadline(context: ToolContext, site: Site) -> None:
    soon = replace(context, deadline=time.monotonic() + 1.0)
    assert "timed out" in refused(soon, url=site.url("/hang"), prompt="p")


def test_webfetch_asks_unless_a_domain_rule_allows_it(tmp_path: Path, site: Site) -> None:
    model = ScriptedModel(
        {
            "reader": [
                {
                    "tool_calls": [
                        {"name": "WebFetch", "input": {"url": site.url("/page"), "prompt": "p"}},
                        {
                            "name": "WebFetch",
                            "input": {"url": site.url("/page", host="localhost"), "prompt": "p"},
                        },
                    ]
                },
                "read",
            ]
        }
    )
    reader = AgentSpec(name="reader", description="Reads.", prompt="Read.")
    with Runtime(
        [reader], model=model, workspace=tmp_path,
        permissions=Permissions(allow=("WebFetch(domain:127.0.0.1)",)),
    ) as rt:  # fmt: skip
        assert rt.run("reader", "go", wait=WAIT).status is RunStatus.COMPLETED
    allowed, asked = [
        b for b in model.requests[1].messages[-1].content if isinstance(b, ToolResultBlock)
    ]
    assert not allowed.is_error and "# Median" in allowed.content
    assert asked.is_error and "Permission to use WebFetch was denied" in asked.content


class Catalogue:
    """A search provider over a fixed list (a real one calls a search API)."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = []

    def search(
        self, query: str, *, allowed_domains: tuple[str, ...], blocked_domains: tuple[str, ...]
    ) -> Sequence[SearchResult]:
        self.asked.append((query, allowed_domains, blocked_domains))
        return [
            SearchResult(
                "Median - Python docs", "https://docs.python.org/3/median", "The  middle."
            ),
            SearchResult("Median on a blog", "https://blog.example.com/median"),
        ]


def test_websearch_answers_from_its_provider_with_domain_filters(tmp_path: Path) -> None:
    provider = Catalogue()
    tool = web_search_tool(provider)
    assert tool.call({"query": "python median"}) == (
        'Web search results for query: "python median"\n\n'
        "- [Median - Python docs](https://docs.python.org/3/median)\n  The middle.\n"
        "- [Median on a blog](https://blog.example.com/median)"
    )
    only = tool.call({"query": "python median", "allowed_domains": ["python.org"]})
    assert "docs.python.org" in only and "blog.example.com" not in only
    blocked = tool.call({"query": "python median", "blocked_domains": ["example.com"]})
    assert "blog.example.com" not in blocked
    assert provider.asked[1] == ("python median", ("python.org",), ())
    with pytest.raises(ToolError, match="invalid input for WebSearch"):
        tool.call({"query": "x"})
    # given to a runtime like any user tool
    model = ScriptedModel(
        {"r": [{"tool_calls": [{"name": "WebSearch", "input": {"query": "median"}}]}, "ok"]}
    )
    with Runtime([AgentSpec(name="r", description="d", prompt="p")], model=model,
                 workspace=tmp_path, tools=[tool]) as rt:  # fmt: skip
        assert rt.run("r", "go", wait=WAIT).status is RunStatus.COMPLETED
    (answer,) = [
        b for b in model.requests[1].messages[-1].content if isinstance(b, ToolResultBlock)
    ]
    assert answer.content.startswith('Web search results for query: "median"')
