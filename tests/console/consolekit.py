"""Helpers for the console's tests: the real `subagents serve` in a subprocess, its URL read
from what it prints, and plain HTTP requests to it (``http.client``: any Host header, any
method, nothing added)."""

from __future__ import annotations

import contextlib
import http.client
import os
import select
import signal
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import msgspec

DEADLINE_S = 60.0
"""A hang guard for each wait (a passing one returns at once)."""


class Served(msgspec.Struct, frozen=True):
    """A console being served: the URL it printed, and its parts."""

    url: str
    host: str
    port: int
    token: str
    stderr: Path

    @property
    def tls(self) -> bool:
        return self.url.startswith("https://")

    @property
    def base(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.host}:{self.port}"

    def connection(self) -> http.client.HTTPConnection:
        """A connection to it: over TLS (its certificate not checked: a test's own) when it
        serves HTTPS."""
        if not self.tls:
            return http.client.HTTPConnection(self.host, self.port, timeout=DEADLINE_S)
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return http.client.HTTPSConnection(
            self.host, self.port, timeout=DEADLINE_S, context=context
        )

    def request(
        self,
        method: str,
        path: str,
        *,
        headers: Mapping[str, str] | None = None,
        body: bytes | None = None,
    ) -> tuple[int, dict[str, str], bytes]:
        """One request, exactly these headers (and Host, unless given): status, headers,
        body."""
        conn = self.connection()
        try:
            given = dict(headers or {})
            conn.putrequest(method, path, skip_host="Host" in given, skip_accept_encoding=True)
            for name, value in given.items():
                conn.putheader(name, value)
            if body is not None:
                conn.putheader("Content-Length", str(len(body)))
            conn.endheaders(body)
            response = conn.getresponse()
            data = response.read()
            return response.status, {k.lower(): v for k, v in response.getheaders()}, data
        finally:
            conn.close()

    def authorized(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


@contextlib.contextmanager
def serving(
    state: Path, *options: str, ray: str | None = None, warned: str | None = None
) -> Iterator[Served]:
    """`subagents serve --state STATE --port 0 OPTIONS` (``ray``: ``--ray RAY`` instead of
    ``--state``, its stderr beside STATE still) for the block; stopped with SIGINT (Ctrl-C)
    after it, and killed if it does not end. ``warned``: a warning the test expects in its
    log (each such line contains it; at least one is there)."""
    stderr = state.parent / f"serve-{os.getpid()}-{time.monotonic_ns()}.err"
    store = ["--ray", ray] if ray is not None else ["--state", str(state)]
    command = [sys.executable, "-m", "subagents.cli.main", "serve", *store]
    with stderr.open("w") as err:
        proc = subprocess.Popen(
            [*command, "--port", "0", *options],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], DEADLINE_S)
        line = proc.stdout.readline().strip() if ready else ""
        assert line.startswith(("http://", "https://")), (
            f"serve printed {line!r}; stderr: {stderr.read_text(errors='replace')}"
        )
        parts = urlsplit(line)
        assert parts.hostname is not None and parts.port is not None
        token = parts.query.removeprefix("token=")
        yield Served(line, parts.hostname, parts.port, token, stderr)
        # Ctrl-C, with pages and their streams maybe still open: it ends, 0, saying nothing
        proc.send_signal(signal.SIGINT)
        assert proc.wait(DEADLINE_S) == 0, stderr.read_text(errors="replace")
        said = stderr.read_text(errors="replace")
        others = [line for line in said.splitlines() if not line.startswith("subagents serve:")]
        if warned is not None:
            assert any(warned in line for line in others), said
            others = [line for line in others if "[warning" not in line or warned not in line]
        assert others == [], said  # no traceback, no stream cut off by the server's stop
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def wait_for(condition: object, what: str) -> None:
    """Poll ``condition()`` until true (a hang guard, not a timing assertion)."""
    deadline = time.monotonic() + DEADLINE_S
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


COUNT_READS = """(() => {
  if (window.__reads !== undefined) return;
  window.__reads = 0;
  const fetch = window.fetch;
  window.fetch = async (...args) => {
    window.__reads += 1;
    try { return await fetch(...args); } finally { window.__reads -= 1; }
  };
})()"""
"""Counts the page's requests in flight (its every read and post goes through ``fetch``; the
stream, an ``EventSource``, does not)."""


def open_settled(page: Any, url: str) -> None:
    """Open ``url`` and wait until its stream is live and every read it made is answered:
    the stream's opening reads the lists again ("ready"), and under load it may open after
    the first read showed its rows; a test holding reads (``Held``) from then on held that
    late one too, in place of its own (CI: a held read of the store before the test's write,
    taken for the one after it, and the row it waited for never came)."""
    page.add_init_script(COUNT_READS)
    page.goto(url)
    settled(page)


def settled(page: Any) -> None:
    """Until the page's stream is live and nothing it asked is unanswered: ``live`` is set
    in the same handler that starts the reads of its opening, so both seen at once mean
    those reads are over (needs ``open_settled``'s counter)."""
    page.wait_for_function(
        """() => document.getElementById('connection')?.dataset.state === 'live'
                 && window.__reads === 0"""
    )


class Held:
    """The requests a page makes to ``pattern``, held in the browser (unanswered) until the
    test lets each go: an answer in flight while the person does something, made certain.

    ``answered_now``: each request is answered by the server when it is held (Playwright's
    ``route.fetch``), its answer kept back until let go: an answer of what the store was
    *then*, landing after later ones (a stale read). Else the request itself waits, and is
    answered with what the store is when let go.

    Each hold is counted in the page (``window.__held``), so that ``wait`` waits on the
    browser's own condition (``page.wait_for_function``), not on a poll of this list."""

    def __init__(self, page: Any, pattern: str, *, answered_now: bool = False) -> None:
        self.page = page
        self.answered_now = answered_now
        self.holding = True
        self.routes: list[tuple[Any, Any]] = []
        page.route(pattern, self._hold)

    def wait(self, count: int) -> None:
        """Until ``count`` requests are held (Playwright's timeout: the hang guard)."""
        self.page.wait_for_function("(n) => (window.__held || 0) >= n", arg=count)
        assert len(self.routes) >= count

    def let_through(self) -> None:
        """Requests from now on go through (those held stay held until released)."""
        self.holding = False

    def _hold(self, route: Any) -> None:
        if not self.holding:
            route.continue_()
            return
        answer = route.fetch() if self.answered_now else None
        self.routes.append((route, answer))
        self.page.evaluate("window.__held = (window.__held || 0) + 1")

    def release(self, index: int) -> None:
        route, answer = self.routes[index]
        if answer is None:
            route.continue_()
        else:
            route.fulfill(response=answer)
