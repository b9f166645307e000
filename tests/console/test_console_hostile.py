"""`subagents serve` against requests its own page never sends: a stranger holding the URL,
a script gone wrong. Each case through a real socket to the real command in a subprocess
(``consolekit.serving``), whose stderr must stay free of tracebacks."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
from consolekit import DEADLINE_S, Served, serving

from subagents.console.actions import TEXT_CAP
from subagents.console.app import BODY_CAP
from subagents.console.guard import served_hosts
from subagents.messages import RunRecord, RunStatus
from subagents.store.sqlite import SQLiteStore


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    path = tmp_path_factory.mktemp("hostile") / "runs.sqlite3"
    with SQLiteStore(path) as store:
        store.save_run(
            RunRecord(
                run_id="r1", agent="worker", task="t", root_run_id="r1",
                status=RunStatus.RUNNING, created_at=1.0, started_at=1.0,
            )
        )  # fmt: skip
    with serving(path) as served:
        yield served


def _open_stream(served: Served) -> socket.socket:
    sock = socket.create_connection((served.host, served.port), timeout=DEADLINE_S)
    sock.sendall(
        f"GET /api/stream HTTP/1.1\r\nHost: 127.0.0.1:{served.port}\r\n"
        f"Authorization: Bearer {served.token}\r\n\r\n".encode()
    )
    return sock


def test_ctrl_c_ends_open_streams_as_complete_responses(tmp_path: Path) -> None:
    # a page left open, one whose reader is stuck: Ctrl-C ends each stream (the chunked
    # body's last chunk), and serve says nothing but its own lines (consolekit.serving)
    path = tmp_path / "runs.sqlite3"
    SQLiteStore(path).close()
    with serving(path) as served:
        reading, stuck = _open_stream(served), _open_stream(served)
        seen = b""
        while b"event: ready" not in seen:
            seen += reading.recv(65536)
    while not seen.endswith(b"0\r\n\r\n"):
        data = reading.recv(65536)
        assert data, f"the stream was cut off: {seen[-200:]!r}"
        seen += data
    reading.close()
    stuck.close()


def _status_of(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1])


def test_the_redirect_dropping_the_token_stays_on_the_console(served: Served) -> None:
    # the path is the request's, put back in the Location header: a path starting with //
    # would send the browser to another site, and an encoded CR LF would add a header (or,
    # refused by the HTTP library, drop the connection with a traceback)
    cases = {
        "//evil.example/x": "/evil.example/x",
        "/%0d%0aSet-Cookie:%20x=y": "/%0d%0aSet-Cookie:%20x=y",
        "/runs/a%2Fb": "/runs/a%2Fb",
        "/runs/%C3%A9t%C3%A9": "/runs/%C3%A9t%C3%A9",
    }
    for path, location in cases.items():
        status, headers, _ = served.request("GET", f"{path}?token={served.token}&x=1")
        assert status == 303, path
        assert headers["location"] == location + "?x=1", path
        assert "x=y" not in headers["set-cookie"], path


def _post_raw(served: Served, head: bytes, body_bytes: int) -> bytes:
    """Send ``head`` then ``body_bytes`` bytes of body, stopping when the console answers
    (or closes); its answer."""
    with socket.create_connection((served.host, served.port), timeout=DEADLINE_S) as sock:
        sock.sendall(head)
        chunk = b"x" * (1 << 20)
        sent = 0
        try:
            while sent < body_bytes:
                sock.sendall(chunk[: body_bytes - sent])
                sent += len(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass  # it answered and closed before the whole body came: as it should
        answer = b""
        while True:
            try:
                data = sock.recv(65536)
            except ConnectionResetError:
                break
            if not data:
                break
            answer += data
    return answer


def test_an_oversized_body_is_refused_without_being_kept(served: Served) -> None:
    assert BODY_CAP >= 6 * TEXT_CAP  # a text at the cap fits, however it is escaped
    size = BODY_CAP + (4 << 20)
    common = (
        f"POST /api/runs/r1/send HTTP/1.1\r\nHost: 127.0.0.1:{served.port}\r\n"
        f"X-Console-Token: {served.token}\r\nOrigin: http://127.0.0.1:{served.port}\r\n"
        "Content-Type: application/json\r\nConnection: close\r\n"
    )
    said = _post_raw(served, f"{common}Content-Length: {size}\r\n\r\n".encode(), size)
    assert _status_of(said) == 413, said[:300]
    assert b"too large" in said
    # the same without a length announced (chunked): counted as it comes
    chunk = b"x" * (1 << 20)
    framed = b"%x\r\n%s\r\n" % (len(chunk), chunk)
    with socket.create_connection((served.host, served.port), timeout=DEADLINE_S) as sock:
        sock.sendall(f"{common}Transfer-Encoding: chunked\r\n\r\n".encode())
        try:
            for _ in range(size >> 20):
                sock.sendall(framed)
            sock.sendall(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
        said = sock.recv(65536)
    assert _status_of(said) == 413, said[:300]


def test_a_body_nested_too_deep_is_a_bad_request_not_a_crash(served: Served) -> None:
    headers = {
        "X-Console-Token": served.token,
        "Origin": f"http://127.0.0.1:{served.port}",
        "Content-Type": "application/json",
    }
    deep = b"[" * 100_000 + b"]" * 100_000
    status, _, body = served.request("POST", "/api/runs/r1/send", headers=headers, body=deep)
    assert status == 400, body
    assert b"nested" in body
    status, _, body = served.request(
        "POST", "/api/runs/r1/send", headers=headers, body=b"\xff\xfe{}"
    )
    assert status == 400 and b"not JSON" in body


@pytest.mark.parametrize(
    ("path", "body", "error"),
    [
        ("/api/runs/r1/send", b'["hi"]', "the body must be a JSON object, not an array"),
        ("/api/runs/r1/stop", b"null", "the body must be a JSON object, not null"),
        ("/api/approvals/a1/allow", b'"hi"', "the body must be a JSON object, not a string"),
        ("/api/runs/r1/send", b'{"text": 5}', "the text must be a JSON string, not a number"),
        ("/api/runs/r1/send", b'{"text": ["hi"]}', "the text must be a JSON string, not an array"),
    ],
)
def test_a_body_of_the_wrong_kind_is_refused_naming_it(
    served: Served, path: str, body: bytes, error: str
) -> None:
    # not taken for an empty body (a stop posted from a body that is no object) nor for an
    # empty text: the error names what was sent
    headers = {
        "X-Console-Token": served.token,
        "Origin": f"http://127.0.0.1:{served.port}",
        "Content-Type": "application/json",
    }
    status, _, answer = served.request("POST", path, headers=headers, body=body)
    assert (status, msgspec.json.decode(answer)["error"]) == (400, error)


def test_a_host_spelled_another_way_is_served_as_a_browser_names_it(tmp_path: Path) -> None:
    # the browser writes 0:0:0:0:0:0:0:1 as [::1] and 127.1 as 127.0.0.1 in the address and
    # the Host header: a console that kept the spelling given refused every request
    path = tmp_path / "runs.sqlite3"
    SQLiteStore(path).close()
    for given, shown in (("0:0:0:0:0:0:0:1", "::1"), ("127.1", "127.0.0.1")):
        with serving(path, "--host", given) as served:
            assert served.host == shown, served.url
            status, _, body = served.request("GET", "/api/session", headers=served.authorized())
            assert status == 200, body
    with serving(path, "--host", "LOCALHOST") as served:  # loopback: no --expose needed
        assert served.host == "127.0.0.1", served.url
        assert served.request("GET", "/api/session", headers=served.authorized())[0] == 200


def test_on_port_80_the_host_without_its_port_is_the_consoles() -> None:
    # a browser leaves the default port out of Host and Origin: on port 80 (behind a proxy,
    # or as root) every request would otherwise be refused as DNS rebinding
    assert {"127.0.0.1", "localhost", "127.0.0.1:80"} <= served_hosts("127.0.0.1", 80)
    assert {"10.1.2.3", "10.1.2.3:80"} <= served_hosts("10.1.2.3", 80)
    assert served_hosts("127.0.0.1", 8765) == {"127.0.0.1:8765", "localhost:8765", "[::1]:8765"}


def test_ctrl_c_as_soon_as_the_url_is_printed_stops_it_quietly(tmp_path: Path) -> None:
    # the URL is printed once the server handles Ctrl-C itself: before, a Ctrl-C landing
    # between the two left "coroutine 'Server.serve' was never awaited" on stderr
    path = tmp_path / "runs.sqlite3"
    SQLiteStore(path).close()
    for _ in range(3):
        with serving(path):
            pass  # consolekit.serving: SIGINT at once, 0, nothing said but serve's own lines


def test_a_store_deleted_or_replaced_while_served_is_said_not_shown_stale(
    tmp_path: Path,
) -> None:
    # SQLite reads the file it opened: without a check the console showed the deleted
    # file's runs forever, and a run of the new store at the same path was "no run X"
    path = tmp_path / "runs.sqlite3"
    with SQLiteStore(path) as store:
        store.save_run(
            RunRecord(
                run_id="old1", agent="worker", task="t", root_run_id="old1",
                status=RunStatus.COMPLETED, created_at=1.0,
            )
        )  # fmt: skip
    with serving(path) as served:
        headers = served.authorized()
        assert served.request("GET", "/api/runs/old1", headers=headers)[0] == 200
        stream = _open_stream(served)
        seen = b""
        while b"event: ready" not in seen:
            seen += stream.recv(65536)
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        with SQLiteStore(path) as store:  # a new store where the old one was
            store.save_run(
                RunRecord(
                    run_id="new1", agent="worker", task="t", root_run_id="new1",
                    status=RunStatus.COMPLETED, created_at=2.0,
                )
            )  # fmt: skip
        while b"event: reload" not in seen:  # the page is told to read again...
            data = stream.recv(65536)
            assert data, seen[-300:]
            seen += data
        stream.close()
        for asked in ("/api/runs", "/api/runs/new1", "/api/approvals"):
            status, _, body = served.request("GET", asked, headers=headers)
            assert status == 503, (asked, body)  # ...and is told why it cannot
            assert b"was replaced by another file" in body and b"subagents serve" in body
        assert served.request("GET", "/", headers=headers)[0] == 200  # the page, to say so
    assert "was replaced by another file" in served.stderr.read_text()


def test_a_value_echoed_in_an_error_is_clipped_saying_so(served: Served) -> None:
    # a filter, a run id, an action of 10,000 characters came back whole in the error
    long = "z" * 10_000
    for path, status in (
        (f"/api/runs?status={long}", 400),
        (f"/api/stream?status={long}", 400),
        (f"/api/runs/{long}", 404),
        (f"/api/approvals?run={long}", 404),
    ):
        got, _, body = served.request("GET", path, headers=served.authorized())
        assert got == status, (path[:40], body[:300])
        error = msgspec.json.decode(body)["error"]
        assert len(error) < 2_500 and "clipped: 10000 characters in all" in error, error[:300]
    headers = {
        **served.authorized(),
        "X-Console-Token": served.token,
        "Origin": f"http://127.0.0.1:{served.port}",
        "Content-Type": "application/json",
    }
    got, _, body = served.request("POST", f"/api/runs/r1/{long}", headers=headers, body=b"{}")
    assert got == 404 and b"clipped: 10000 characters in all" in body, body[:300]
    assert long not in served.stderr.read_text(errors="replace")  # nor on serve's terminal


def test_forwarded_headers_from_loopback_are_not_believed(served: Served) -> None:
    # uvicorn trusts X-Forwarded-For/-Proto from 127.0.0.1 by default: any local process
    # could say what scheme and client address the console sees (its own redirects named
    # https:// from a plain HTTP port). No proxy sits in front of the console: none is trusted
    forged = {**served.authorized(), "X-Forwarded-Proto": "https", "X-Forwarded-For": "10.9.9.9"}
    status, headers, _ = served.request("GET", "/api/runs/", headers=forged)
    assert status == 307, status  # Starlette's redirect to the path without its slash
    assert headers["location"] == f"http://127.0.0.1:{served.port}/api/runs", headers


def test_a_run_id_with_a_slash_opens_its_page(tmp_path: Path) -> None:
    # only a hand-edited store or a hostile cluster peer makes one, but its page did not
    # open: Starlette's {run_id} stops at the slash the browser's %2F becomes
    path = tmp_path / "runs.sqlite3"
    with SQLiteStore(path) as store:
        store.save_run(
            RunRecord(
                run_id="a/b", agent="worker", task="t", root_run_id="a/b",
                status=RunStatus.RUNNING, created_at=1.0, started_at=1.0,
            )
        )  # fmt: skip
    with serving(path) as served:
        headers = served.authorized()
        status, _, body = served.request("GET", "/runs/a%2Fb", headers=headers)
        assert (status, b"run.js" in body) == (200, True), body[:300]
        status, _, body = served.request("GET", "/api/runs/a%2Fb", headers=headers)
        assert status == 200, body[:300]
        assert msgspec.json.decode(body)["run"]["run_id"] == "a/b", body[:300]
        posting = {
            **headers,
            "X-Console-Token": served.token,
            "Origin": f"http://127.0.0.1:{served.port}",
            "Content-Type": "application/json",
        }
        status, _, body = served.request(
            "POST", "/api/runs/a%2Fb/stop", headers=posting, body=b"{}"
        )
        assert status == 200, body[:300]
        assert msgspec.json.decode(body)["run_id"] == "a/b", body[:300]
        # an empty run id is still Starlette's redirect, not a run named ""
        assert served.request("GET", "/api/runs/", headers=headers)[0] == 307
