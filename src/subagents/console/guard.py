"""Who may ask the console anything: the token, the Host header, same-origin writes.

Why each check (docs/console.md, "Security"): the console shows every run's conversation
and can stop, mail and continue runs, so it is a door into the user's agents.

- The token: a random secret printed in the URL (``/?token=...``, as Jupyter does). A page
  opened with it gets it in a cookie (HttpOnly, SameSite=Strict, named after the port, as
  browsers share cookies between ports) and is sent on to the same address without it, so
  links work and the token leaves the address bar; a script gives it as ``Authorization:
  Bearer TOKEN`` or ``X-Console-Token``. Without it every request is refused (401), even the
  page's static files: another user of the machine, or a page in the browser, learns nothing.
- The Host header: a request whose ``Host`` is not the address served (``127.0.0.1:PORT``,
  ``localhost:PORT``) is refused (403) before anything else. That is DNS rebinding: a site
  whose name is made to resolve to 127.0.0.1 would otherwise be same-origin with the console
  in the browser (it still lacks the token, but it would be one guess away).
- Writes (anything but GET and HEAD): the token in a header (a cookie alone would be sent
  by a cross-site form), and an ``Origin`` (or, without one, ``Referer``) that is the
  console's own (403 otherwise): a page elsewhere cannot make the browser post for it.
- A request head over ``limits.HEAD_BYTES`` is refused (431) before anything is looked at.
- Every answer forbids inline script and any other origin (Content-Security-Policy), being
  framed, sniffing types, sending a referrer, and caching.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable
from http.cookies import SimpleCookie
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from subagents.console.limits import HEAD_BYTES

TOKEN_HEADER = "x-console-token"
SAFE_METHODS = frozenset({"GET", "HEAD"})
SECURITY_HEADERS = {
    "content-security-policy": "default-src 'none'; script-src 'self'; style-src 'self';"
    " img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self';"
    " frame-ancestors 'none'",
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}
LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})
DEFAULT_PORT = 80
"""HTTP's: a browser names the host without it."""
DEFAULT_TLS_PORT = 443
"""HTTPS's, likewise."""


def served_hosts(host: str, port: int, *, tls: bool = False) -> frozenset[str]:
    """The ``Host`` values a browser sends for the address served: ``host:port``, and for a
    loopback address the names of loopback too; on the scheme's default port (80, or 443
    over HTTPS) each name alone as well (a browser leaves it out, in Host and in Origin)."""
    names = {host} | (LOOPBACK if host in LOOPBACK else set())
    shown = {f"[{n}]" if ":" in n else n for n in names}
    default = DEFAULT_TLS_PORT if tls else DEFAULT_PORT
    return frozenset({f"{n}:{port}" for n in shown} | (shown if port == default else set()))


class Guard:
    """ASGI middleware in front of the console's application (see the module docstring)."""

    def __init__(
        self, app: ASGIApp, *, token: str, hosts: Iterable[str], port: int, tls: bool = False
    ) -> None:
        self.app = app
        self.token = token
        self.hosts = frozenset(h.lower() for h in hosts)
        scheme = "https" if tls else "http"
        self.origins = frozenset(f"{scheme}://{h}" for h in self.hosts)
        self.cookie = f"subagents-console-{port}"
        self.cookie_flags = "HttpOnly; SameSite=Strict; Path=/" + ("; Secure" if tls else "")
        """Over HTTPS, Secure: the browser never sends the cookie over plain HTTP."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":  # no websockets here
            await send({"type": "websocket.close", "code": 1008})
            return
        headers = Headers(scope=scope)
        refusal = _too_large(scope) or self._refusal(scope, headers)
        if refusal is not None:
            status, text = refusal
            await _plain(send, status, text)
            return
        query = _query(scope)
        if "token" in query and scope["method"] in SAFE_METHODS:
            path: str = scope["path"]
            if not path.startswith("/api/"):  # a page: keep the token, drop it from the URL
                await self._redirect_with_cookie(send, scope, query)
                return
        await self.app(scope, receive, _secured(send))

    def holds_token(self, scope: Scope) -> bool:
        """Whether the request shows the token (in its query, a header or the cookie): the
        owner's, whose connection then holds one of the owner's slots (``admission.py``)."""
        given = self._token_of(scope, Headers(scope=scope))
        return given is not None and hmac.compare_digest(given.encode(), self.token.encode())

    def _refusal(self, scope: Scope, headers: Headers) -> tuple[int, str] | None:
        """Why the request is refused (status, text), or None."""
        host = headers.get("host", "").lower()
        if host not in self.hosts:
            return 403, (
                f"this console answers only as {' or '.join(sorted(self.hosts))}; the Host"
                " header names another (DNS rebinding is refused)"
            )
        given = _tokens_in_query(scope)
        if given > 1:  # which one counts would be this parser's choice (the last), not theirs
            return 400, f"the query gives the token {given} times: give it once"
        if not self.holds_token(scope):
            return 401, (
                "no valid token: open the URL `subagents serve` printed (it ends with"
                " ?token=...), or give the token as Authorization: Bearer TOKEN"
            )
        if scope["method"] in SAFE_METHODS:
            return None
        header = headers.get(TOKEN_HEADER) or _bearer(headers)
        if header is None or not hmac.compare_digest(header.encode(), self.token.encode()):
            return 403, "a request that changes something needs the token in a header"
        origin = headers.get("origin") or _origin_of(headers.get("referer"))
        if origin is None or origin.lower() not in self.origins:
            return 403, "a request that changes something must come from the console's own page"
        return None

    def _token_of(self, scope: Scope, headers: Headers) -> str | None:
        query = _query(scope)
        if "token" in query:
            return query["token"]
        given = headers.get(TOKEN_HEADER) or _bearer(headers)
        if given is not None:
            return given
        cookies = SimpleCookie()
        try:
            cookies.load(headers.get("cookie", ""))
        except Exception:  # a malformed cookie header: as if none
            return None
        morsel = cookies.get(self.cookie)
        return str(morsel.value) if morsel is not None else None

    async def _redirect_with_cookie(self, send: Send, scope: Scope, query: dict[str, str]) -> None:
        rest = {k: v for k, v in query.items() if k != "token"}
        location = _same_site_path(scope) + (f"?{urlencode(rest)}" if rest else "")
        cookie = f"{self.cookie}={self.token}; {self.cookie_flags}"
        await _secured(send)(
            {
                "type": "http.response.start",
                "status": 303,
                "headers": [(b"location", location.encode()), (b"set-cookie", cookie.encode())],
            }
        )
        await send({"type": "http.response.body", "body": b""})


def _too_large(scope: Scope) -> tuple[int, str] | None:
    """431 for a request head over ``HEAD_BYTES``: h11 refuses one only while it is
    incomplete, so a larger one that arrives in one read would be served."""
    size = len(scope.get("raw_path") or b"") + len(scope.get("query_string", b""))
    size += sum(len(name) + len(value) + 4 for name, value in scope["headers"])
    if size <= HEAD_BYTES:
        return None
    return 431, f"the request's head is over {HEAD_BYTES} bytes"


def _same_site_path(scope: Scope) -> str:
    """The request's path as a Location on this console: as the client encoded it (decoded,
    an encoded CR LF would end the header, a ``%2F`` become a separator), anything else
    encoded, and one leading slash (a browser follows ``//evil.example/`` to another site)."""
    raw: bytes | None = scope.get("raw_path")
    path = raw.decode("latin-1") if raw else scope["path"]
    return "/" + quote(path, safe="/%!$&'()*+,;=:@-._~").lstrip("/")


def _query(scope: Scope) -> dict[str, str]:
    raw: bytes = scope.get("query_string", b"")
    return dict(parse_qsl(raw.decode("latin-1")))


def _tokens_in_query(scope: Scope) -> int:
    """How many times the query gives ``token``, its name read as ``_query`` reads it
    (percent-decoded: ``tok%65n`` is ``token`` there, so no test of the raw bytes first)."""
    raw: bytes = scope.get("query_string", b"")
    if not raw:  # (most requests: the cookie or a header)
        return 0
    return sum(1 for name, _ in parse_qsl(raw.decode("latin-1")) if name == "token")


def _bearer(headers: Headers) -> str | None:
    value = headers.get("authorization", "")
    scheme, _, token = value.partition(" ")
    return token.strip() if scheme.lower() in ("bearer", "token") and token.strip() else None


def _origin_of(url: str | None) -> str | None:
    if not url:
        return None
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else None


def _secured(send: Send) -> Send:
    """``send`` with the security headers added to the response's start."""

    async def wrapped(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = MutableHeaders(scope=message)
            for name, value in SECURITY_HEADERS.items():
                headers[name] = value
        await send(message)

    return wrapped


async def _plain(send: Send, status: int, text: str) -> None:
    body = (text + "\n").encode()
    await _secured(send)(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
