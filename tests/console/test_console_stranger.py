"""`subagents serve` attacked by a stranger on its port, what test_console_hostile.py and
test_console_limits.py leave out: every way to answer an approval across sites or with the
token in the wrong place, paths that climb out of the static files, two Host headers, and
hostile text of the store (a run's id, agent, task, label, error, a tool's input, an
approval's tool and reason) rendered in the real browser. The real command in a subprocess
(``consolekit.serving``) on a real SQLite store; the page in a real Chromium."""

from __future__ import annotations

import contextlib
import json
import resource
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from consolekit import DEADLINE_S, Served, serving
from msgspec.structs import replace

from damaged_rows import ask, run, saved
from subagents.messages import Event, EventKind, Outcome, RunStatus
from subagents.store.sqlite import SQLiteStore

MARKUP = "<img src=x onerror=\"window.pwned='{n}'\"><script>window.pwned='{n}'</script><b>b</b>"
"""Markup that runs a script if put in the page as HTML (``{n}``: where it came from)."""
HOSTILE_ID = "r-" + MARKUP.format(n="id").replace("/", "")  # (a path segment: no slash)
APPROVAL = "ap-stranger"


def _hostile(n: str) -> str:
    return MARKUP.format(n=n)


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A root waiting for an approval (hostile id, agent, task, label, tool, input, reason)
    and its failed child (hostile error), with a hostile tool call in its events."""
    path = tmp_path_factory.mktemp("stranger") / "runs.sqlite3"
    now = time.time()
    root = replace(
        run(HOSTILE_ID, now, agent=_hostile("agent")),
        task=_hostile("task"),
        label=_hostile("label"),
    )
    child = run("r-stranger-child", now + 1, parent=root, status=RunStatus.FAILED)
    failed = Outcome(run_id=child.run_id, status=RunStatus.FAILED, error=_hostile("error"))
    child = replace(child, outcome=failed)
    asked = replace(
        ask(root, 0, now, APPROVAL),
        tool=_hostile("tool"),
        input={"command": _hostile("input")},
        reason=_hostile("reason"),
    )
    saved(path, [root, child], [asked])
    with SQLiteStore(path) as store:
        store.append_event(
            Event(
                kind=EventKind.TOOL_CALL, run_id=HOSTILE_ID, agent=root.agent,
                root_run_id=HOSTILE_ID, data={"tool": "Bash", "input": {"x": _hostile("call")}},
            )
        )  # fmt: skip
    return path


@pytest.fixture(scope="module")
def served(state: Path) -> Iterator[Served]:
    with serving(state) as served:
        yield served


def _pending(served: Served) -> list[str]:
    status, _, body = served.request("GET", "/api/approvals", headers=served.authorized())
    assert status == 200, body
    return [a["approval_id"] for a in json.loads(body)]


def test_an_approval_cannot_be_answered_across_sites_or_with_the_token_misplaced(
    served: Served,
) -> None:
    """Each way a page elsewhere, or a stranger holding only part of what is needed, could
    post an answer: refused (403, or 415 for a form's body), and the approval still waits."""
    own = f"http://127.0.0.1:{served.port}"
    cookie = f"subagents-console-{served.port}={served.token}"
    json_body = {"Content-Type": "application/json"}
    header = {"X-Console-Token": served.token, **json_body}
    path = f"/api/approvals/{APPROVAL}/allow"
    refused: dict[str, tuple[str, dict[str, str], int]] = {
        "the cookie alone (what a cross-site form sends)": (
            path, {"Cookie": cookie, "Origin": own, **json_body}, 403),
        "the token in the query, not a header": (
            f"{path}?token={served.token}", {"Origin": own, **json_body}, 403),
        "another site's origin": (path, {**header, "Origin": "http://evil.example"}, 403),
        "an opaque origin (a sandboxed frame, a data: page)": (
            path, {**header, "Origin": "null"}, 403),
        "no origin and no referer": (path, header, 403),
        "a look-alike referer": (
            path, {**header, "Referer": f"http://127.0.0.1.evil.example:{served.port}/"}, 403),
        "the console's address on another port": (
            path, {**header, "Origin": f"http://127.0.0.1:{served.port + 1}"}, 403),
        "https: an origin the plain console never has": (
            path, {**header, "Origin": f"https://127.0.0.1:{served.port}"}, 403),
        "a form's text/plain body (no preflight)": (
            path, {**header, "Origin": own, "Content-Type": "text/plain"}, 415),
        "a form's urlencoded body": (
            path, {**header, "Origin": own,
                   "Content-Type": "application/x-www-form-urlencoded"}, 415),
        "the token under another scheme (Basic)": (
            path, {"Authorization": f"Basic {served.token}", "Origin": own, **json_body}, 401),
        "another port's cookie": (
            path, {"Cookie": f"subagents-console-{served.port + 1}={served.token}",
                   "Origin": own, **json_body}, 401),
        "the token less its last character": (
            path, {"X-Console-Token": served.token[:-1], "Origin": own, **json_body}, 401),
    }  # fmt: skip
    for why, (target, headers, expected) in refused.items():
        status, _, body = served.request("POST", target, headers=headers, body=b'{"reason": "x"}')
        assert status == expected, (why, status, body)
    assert _pending(served) == [APPROVAL]


def test_no_path_climbs_out_of_the_static_files(served: Served) -> None:
    """Traversal spelled every way a server has been fooled by: 404, nothing of a file
    outside ``static/`` (the console's own source beside it, the system's)."""
    for path in (
        "/static/../app.py", "/static/%2e%2e/app.py", "/static/..%2fapp.py",
        "/static/%252e%252e/app.py", "/static/..\\app.py", "/static/..%5capp.py",
        "/static/tree.js%00.html", "/static//etc/passwd", "/static/%2fetc%2fpasswd",
        "/static/", "/static/../../../../../../etc/passwd", "/runs/..%2f..%2fetc%2fpasswd",
    ):  # fmt: skip
        status, _, body = served.request("GET", path, headers=served.authorized())
        assert status in (400, 404), (path, status, body[:200])
        assert b"import " not in body and b"root:" not in body, (path, body[:200])


def test_a_request_with_two_host_headers_is_refused(served: Served) -> None:
    """The second Host one a proxy might believe (the first the console's): 400."""
    with socket.create_connection((served.host, served.port), timeout=DEADLINE_S) as sock:
        sock.sendall(
            f"GET /api/runs HTTP/1.1\r\nHost: 127.0.0.1:{served.port}\r\nHost: evil.example\r\n"
            f"Authorization: Bearer {served.token}\r\n\r\n".encode()
        )
        head = sock.recv(4096)
    assert head.startswith(b"HTTP/1.1 400 "), head


def test_a_flood_of_thousands_of_connections_keeps_to_the_open_files_allowed(
    tmp_path: Path,
) -> None:
    """2,000 strangers' connections, each sending part of a request head, opened as fast
    as the port takes them, against a serve allowed 1,024 open files (a common default):
    asyncio accepted up to 2,048 at one turn (uvicorn's backlog) before any was closed, ran
    out of files, wrote a traceback per refused accept on serve's terminal (some 16,000
    for 3,000 connections) and stopped accepting for a second at a time, the owner's own
    requests among those refused. Accepted a batch of ``limits.ACCEPT_BATCH`` at a time,
    the oldest strangers closed between batches: no traceback (``serving`` fails on any
    line it did not expect), and the owner is served while the flood goes on."""
    path = tmp_path / "runs.sqlite3"
    saved(path, [run("r-flooded", time.time())])
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(1024, hard), hard))  # serve's, inherited
    try:
        with serving(path) as served:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))  # (the flood's own)
            held: list[socket.socket] = []
            flooded = threading.Event()

            def flood() -> None:
                try:
                    for _ in range(2000):
                        sock = socket.create_connection(
                            (served.host, served.port), timeout=DEADLINE_S
                        )
                        held.append(sock)
                        head = f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{served.port}\r\nX-Pad: a"
                        sock.sendall(head.encode())
                finally:
                    flooded.set()

            flooding = threading.Thread(target=flood, name="flood")
            flooding.start()
            answered: list[int] = []
            try:
                while not flooded.is_set() or not answered:
                    # (a connection of the owner's closed before its request was read is
                    # the documented cost of one address's flood: the page's reload is)
                    with contextlib.suppress(ConnectionError):
                        status, _, _ = served.request(
                            "GET", "/api/runs", headers=served.authorized()
                        )
                        answered.append(status)
            finally:
                flooding.join(DEADLINE_S * 4)
                for sock in held:
                    sock.close()
            assert len(held) == 2000, len(held)  # (every connection made)
            assert set(answered) == {200}, answered
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _injected(page: Any, scope: str) -> int:
    return int(page.locator(f"{scope} img, {scope} script, {scope} b").count())


def test_hostile_text_of_the_store_is_shown_as_text_in_the_browser(
    page: Any, served: Served
) -> None:
    """Every text of the store that reaches the page from someone else (a run's id, agent,
    task, label, error; a tool call's input; an approval's tool, input and reason) is shown
    as its characters: no element made of it, no script run; the hostile id's link opens
    its own page."""
    page.goto(served.url)
    row = page.locator("#tree tr[data-run]").first
    row.wait_for()
    asked = page.locator(f'#approvals tr[data-approval="{APPROVAL}"]')
    asked.wait_for()
    tree_text = page.locator("#tree").text_content() or ""
    for where in ("agent", "task", "label"):
        assert _hostile(where) in tree_text, (where, tree_text[:500])
    shown = asked.text_content() or ""
    for where in ("tool", "reason"):
        assert _hostile(where) in shown, (where, shown)
    assert "<script>window.pwned='input'</script>" in shown, shown  # (in its JSON)
    assert _injected(page, "#tree") == 0 and _injected(page, "#approvals") == 0
    assert page.evaluate("window.pwned") is None
    rows = page.locator("#tree tr[data-run]")
    ids = [rows.nth(i).get_attribute("data-run") for i in range(rows.count())]
    assert HOSTILE_ID in ids, ids  # (the id whole, as an attribute's value)
    rows.nth(ids.index(HOSTILE_ID)).locator("a").first.click()
    page.wait_for_url("**/runs/**")
    facts = page.locator("#facts")
    facts.wait_for()
    page.wait_for_function(
        "(t) => (document.querySelector('#facts')?.textContent || '').includes(t)",
        arg=_hostile("task"),
    )
    call = page.locator("#entries", has_text="<script>window.pwned='call'</script>")
    call.wait_for()
    assert _injected(page, "#facts") == 0 and _injected(page, "#entries") == 0
    page.goto(f"{served.base}/runs/r-stranger-child")
    page.wait_for_function(
        "(t) => (document.body.textContent || '').includes(t)", arg=_hostile("error")
    )
    assert _injected(page, "body main") == 0 and _injected(page, "#facts") == 0
    assert page.evaluate("window.pwned") is None
