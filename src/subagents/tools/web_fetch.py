"""WebFetch: a web page for the model, as markdown (Claude Code's WebFetch, same input).

The page is fetched with the standard library (``urllib``: GET, at most ``MAX_BYTES``, within
``TIMEOUT_S`` and the run's deadline), HTML is turned into markdown by ``markdownify`` (the
``web`` extra: a small, well-kept library over BeautifulSoup), other text is shown as it is.
Claude Code then has a small model answer ``prompt`` from the page; here the page itself is
the answer (cut at ``OUTPUT_LIMIT`` characters), after the prompt, for the run's own model
to answer from.

Network access is a permission: WebFetch needs approval where Claude Code would ask, unless a
rule allows it: ``WebFetch(domain:docs.python.org)`` (that host), ``WebFetch(domain:*.python.org)``
(its subdomains too), plain ``WebFetch`` (every fetch). A redirect to another host is not
followed: the model is told where it leads and fetches that URL itself, so the rules decide on
the host it really reaches.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from http.client import HTTPMessage
from typing import IO, Annotated, Any

import msgspec

from subagents.tools.base import Tool, ToolError, decode_input, need_context, struct_schema
from subagents.tools.context import ToolContext

NAME = "WebFetch"
TIMEOUT_S = 30.0
MAX_BYTES = 5_000_000
"""A page larger than this is cut here (its first 5 MB are shown)."""
OUTPUT_LIMIT = 100_000
USER_AGENT = "subagents-webfetch/1 (+https://github.com/subagents)"


class WebFetchInput(msgspec.Struct):
    url: Annotated[str, msgspec.Meta(description="The URL to fetch content from")]
    prompt: Annotated[str, msgspec.Meta(description="The prompt to run on the fetched content")]


DESCRIPTION = """Fetches content from a specified URL and returns it as markdown.
- Takes a URL and a prompt as input; fetches the URL and converts HTML to markdown
- Use the prompt to say what information you want from the page
- The URL must be a fully-formed valid http(s) URL
- When a URL redirects to a different host, the tool tells you the redirect URL: make a new
  WebFetch request with it
- This tool is read-only and does not modify any files"""


def domain_matches(specifier: str, url: object) -> bool:
    """Whether a ``WebFetch(domain:...)`` rule's specifier covers ``url``'s host."""
    if not specifier.startswith("domain:") or not isinstance(url, str):
        return False
    want = specifier[len("domain:") :].strip().lower().rstrip(".")
    host = (urllib.parse.urlsplit(url).hostname or "").lower().rstrip(".")
    if not host or not want:
        return False
    if want.startswith("*."):
        return host == want[2:] or host.endswith(want[1:])
    return host == want


class _SameHostRedirects(urllib.request.HTTPRedirectHandler):
    """Follow redirects on the same host only; another host is the model's next call."""

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: IO[bytes],
        code: int,
        msg: str,
        headers: HTTPMessage,
        newurl: str,
    ) -> urllib.request.Request | None:
        old, new = urllib.parse.urlsplit(req.full_url), urllib.parse.urlsplit(newurl)
        if (old.hostname, old.port) != (new.hostname, new.port):
            raise _Elsewhere(newurl, code)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


class _Elsewhere(Exception):
    def __init__(self, url: str, code: int) -> None:
        super().__init__(url)
        self.url, self.code = url, code


def run(arguments: Mapping[str, Any], ctx: ToolContext | None) -> str:
    ctx = need_context(NAME, ctx)
    args = decode_input(NAME, WebFetchInput, arguments)
    parts = urllib.parse.urlsplit(args.url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ToolError(f"url must be a full http(s) URL, not {args.url!r}")
    timeout = min(TIMEOUT_S, ctx.deadline - time.monotonic())
    if timeout <= 0:
        raise ToolError("WebFetch: the run's deadline has passed")
    opener = urllib.request.build_opener(_SameHostRedirects())
    request = urllib.request.Request(args.url, headers={"User-Agent": USER_AGENT})
    try:
        with opener.open(request, timeout=timeout) as response:
            status = response.status
            content_type = response.headers.get_content_type()
            charset = response.headers.get_content_charset() or "utf-8"
            body = response.read(MAX_BYTES + 1)
            final_url = response.url
    except _Elsewhere as moved:
        return (
            f"REDIRECT DETECTED: {args.url} redirects ({moved.code}) to a different host:"
            f" {moved.url}\nTo fetch it, make a new WebFetch request with url {moved.url!r}"
            f" (and the same prompt)."
        )
    except urllib.error.HTTPError as exc:
        raise ToolError(f"WebFetch of {args.url} failed: HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ToolError(f"WebFetch of {args.url} failed: {reason}") from None
    cut = len(body) > MAX_BYTES
    body = body[:MAX_BYTES]
    if not (content_type.startswith("text/") or content_type in _TEXT_TYPES):
        raise ToolError(f"{args.url} is {content_type}, not a page WebFetch can show as text")
    text = body.decode(charset if _known(charset) else "utf-8", errors="replace")
    if content_type in ("text/html", "application/xhtml+xml"):
        text = to_markdown(text)
    if len(text) > OUTPUT_LIMIT:
        text = text[:OUTPUT_LIMIT] + f"\n\n[content cut at {OUTPUT_LIMIT:,} characters]"
    note = f" (cut at {MAX_BYTES:,} bytes)" if cut else ""
    return (
        f"Fetched {final_url} (HTTP {status}, {content_type}, {len(body):,} bytes{note}).\n"
        f"Answer this from the content below: {args.prompt}\n\n{text.strip()}"
    )


_TEXT_TYPES = frozenset(
    {"application/json", "application/xml", "application/xhtml+xml", "application/javascript"}
)


def _known(charset: str) -> bool:
    import codecs

    try:
        codecs.lookup(charset)
    except LookupError:
        return False
    return True


def to_markdown(html: str) -> str:
    """HTML as markdown (headings with ``#``; markdownify leaves scripts and styles out)."""
    try:
        from markdownify import markdownify
    except ImportError:
        raise ToolError(
            "WebFetch needs the markdownify package: pip install 'subagents[web]'"
        ) from None
    markdown: str = markdownify(html, heading_style="ATX")
    lines = [line.rstrip() for line in markdown.splitlines()]
    # markdownify keeps the blank lines of the page's layout: at most one in a row
    kept: list[str] = []
    for line in lines:
        if line or (kept and kept[-1]):
            kept.append(line)
    return "\n".join(kept)


TOOL = Tool(
    name=NAME,
    starts_processes=False,
    description=DESCRIPTION,
    input_schema=struct_schema(WebFetchInput),
    run=run,
    needs_approval=True,  # the network: asked where Claude Code asks, unless a rule allows
    idempotent=True,  # a GET: after a crash it may simply run again
    params=WebFetchInput,
)
