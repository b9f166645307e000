"""`subagents serve` against clients that hold on: a connection that sends nothing, a request
head or body dribbled, a stream whose client reads nothing, more connections or streams than
it serves (console/limits.py, protocol.py, hub.py). Real sockets against the real command in a
subprocess (``consolekit.serving``), or against the console served by uvicorn in a thread of
this process with short deadlines (``console_in_thread``: so a deadline passes while the test
waits, and the server's own state can be looked at). What is asserted is what happened (the
connection dropped, the 503 came, a well-behaved client was answered meanwhile), never how
long it took."""

from __future__ import annotations

import contextlib
import http.client
import select
import socket
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import msgspec
import pytest
from consolekit import DEADLINE_S, Served, serving, wait_for

from subagents.cli.state import open_store
from subagents.console.app import Console
from subagents.console.limits import HEAD_BYTES, Limits
from subagents.console.serve_cmd import bind
from subagents.console.serving import build, serving_in_thread
from subagents.messages import Event, EventKind, RunRecord, RunStatus
from subagents.store.sqlite import SQLiteStore

pytestmark = pytest.mark.skipif(
    not hasattr(socket, "TCP_INFO"), reason="reads a socket's TCP state (Linux's TCP_INFO)"
)

TCP_ESTABLISHED = 1
TOKEN = "0123456789abcdef" * 3
SHORT = Limits(head_timeout_s=1.0, stall_timeout_s=1.0, body_timeout_s=1.0)
"""Deadlines that pass while a test waits (the defaults are ten times these and more)."""


class Console_(msgspec.Struct, frozen=True):
    """A console served from a thread of this process."""

    console: Console
    port: int

    def connect(self) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=DEADLINE_S)

    def get(self, path: str) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=DEADLINE_S)
        try:
            conn.request("GET", path, headers={"Authorization": f"Bearer {TOKEN}"})
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()


@contextlib.contextmanager
def console_in_thread(path: Path, limits: Limits = SHORT) -> Iterator[Console_]:
    store = open_store(path)
    sock = bind("127.0.0.1", 0)
    port = sock.getsockname()[1]
    try:
        console, app = build(
            store, host="127.0.0.1", port=port, token=TOKEN, continuation=None, limits=limits
        )
        with serving_in_thread(app, sock, limits):
            yield Console_(console, port)
    finally:
        sock.close()
        store.close()


def _store(path: Path) -> Path:
    with SQLiteStore(path) as store:
        store.save_run(
            RunRecord(
                run_id="r1", agent="worker", task="t", root_run_id="r1",
                status=RunStatus.RUNNING, created_at=1.0, started_at=1.0,
            )
        )  # fmt: skip
    return path


def _tcp_state(sock: socket.socket) -> int:
    """The socket's TCP state as the kernel has it (1: established), read without reading
    what it received."""
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)[0]


def _open_stream(port: int, token: str, *, small_buffer: bool = False) -> socket.socket:
    """A stream of changes opened by hand, read up to its first event (``ready``)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if small_buffer:  # a client that reads nothing fills this at once
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(DEADLINE_S)
    sock.connect(("127.0.0.1", port))
    sock.sendall(
        f"GET /api/stream HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Authorization: Bearer {token}\r\n\r\n".encode()
    )
    seen = b""
    while b"event: ready" not in seen and b"\r\n\r\n{" not in seen:
        data = sock.recv(4096)
        assert data, seen
        seen += data
    assert seen.startswith(b"HTTP/1.1 200"), seen[:300]
    return sock


def _answer(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes (a reset counts as the end)."""
    said = b""
    while True:
        try:
            data = sock.recv(65536)
        except ConnectionResetError:
            return said
        if not data:
            return said
        said += data


def _write_big_runs(path: Path, count: int, label_bytes: int) -> None:
    """Runs whose rows are large (a label of ``label_bytes``), each with the event that makes
    the console send its row to every stream."""
    with SQLiteStore(path) as store:
        for i in range(count):
            record = RunRecord(
                run_id=f"big{i}", agent="worker", task="t", root_run_id=f"big{i}",
                status=RunStatus.COMPLETED, created_at=2.0 + i, label="x" * label_bytes,
            )  # fmt: skip
            with store.batch():
                store.save_run(record)
                store.append_event(
                    Event(kind=EventKind.COMPLETED, run_id=record.run_id, agent="worker",
                          root_run_id=record.run_id)
                )  # fmt: skip


def _read_until(sock: socket.socket, needle: bytes) -> None:
    seen = b""
    while needle not in seen:
        data = sock.recv(1 << 20)
        assert data, f"closed before {needle!r}"
        seen = seen[-len(needle) :] + data


@contextlib.contextmanager
def _reading_meanwhile(sock: socket.socket, needle: bytes) -> Iterator[None]:
    """Read ``sock`` in a thread while the body runs, until ``needle`` came (raising what the
    reading raised). A page that reads reads as the changes come: one that waited for the
    writes to end would itself be a client reading nothing for as long as they take, and on
    a loaded machine that passed the stall deadline and the server reset it too."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        read = pool.submit(_read_until, sock, needle)
        yield
        read.result(timeout=DEADLINE_S)


# ---- connections that send too little -------------------------------------------------------


def test_a_connection_sending_nothing_or_a_head_a_byte_at_a_time_is_dropped(
    tmp_path: Path,
) -> None:
    # uvicorn arms no timer before a first response: both were held for ever
    with console_in_thread(_store(tmp_path / "runs.sqlite3")) as served:
        silent = served.connect()
        dribbling = served.connect()
        head = f"GET /api/session HTTP/1.1\r\nHost: 127.0.0.1:{served.port}\r\n".encode()
        head += b"X-Pad: " + b"a" * 400  # and never the blank line that ends a head
        for sent in range(len(head)):  # a byte whenever the server said nothing for 0.05 s
            readable, _, _ = select.select([dribbling], [], [], 0.05)
            if readable:
                break
            dribbling.sendall(head[sent : sent + 1])
            if sent == 5:  # meanwhile a well-behaved client is answered
                assert served.get("/api/session")[0] == 200
        said = _answer(dribbling)
        assert said.startswith(b"HTTP/1.1 408"), said[:300]
        assert b"did not come whole within 1 s" in said
        assert _answer(silent) == b""  # closed, nothing said to a connection that said nothing
        assert served.get("/api/session")[0] == 200
        silent.close()
        dribbling.close()


def test_a_head_over_16_kib_is_refused_and_the_console_answers_on(tmp_path: Path) -> None:
    with console_in_thread(_store(tmp_path / "runs.sqlite3")) as served:
        start = f"GET /api/session HTTP/1.1\r\nHost: 127.0.0.1:{served.port}\r\n".encode()
        # in one piece: h11 took it whole (it refuses only a head still incomplete past
        # its limit), and the console served it
        with served.connect() as sock:
            sock.sendall(start + b"X-Pad: " + b"a" * HEAD_BYTES + b"\r\n\r\n")
            said = _answer(sock)
        assert said.startswith(b"HTTP/1.1 431"), said[:300]
        assert f"over {HEAD_BYTES} bytes".encode() in said
        # still coming past the limit: h11's 400, and the connection closed
        with served.connect() as sock:
            sock.sendall(start + b"X-Pad: " + b"a" * (4 * HEAD_BYTES))
            said = _answer(sock)
        assert said.startswith(b"HTTP/1.1 400"), said[:300]
        assert served.get("/api/session")[0] == 200


def test_a_strangers_malformed_requests_are_refused_without_a_word_on_the_terminal(
    tmp_path: Path,
) -> None:
    # uvicorn said "Invalid HTTP request received." (and for an upgrade, to pip install
    # websockets) on serve's stderr for each one: anyone on the port could fill the terminal
    path = _store(tmp_path / "runs.sqlite3")
    with serving(path) as served:  # consolekit: serve's stderr has only its own lines
        head = f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{served.port}\r\n"
        for payload, status in (
            (b"NOT HTTP AT ALL\r\n\r\n", b"400"),
            (head.encode() + b"X-Pad: " + b"a" * (4 * HEAD_BYTES), b"400"),
            (f"{head}Connection: upgrade\r\nUpgrade: websocket\r\n\r\n".encode(), b"401"),
        ):
            with socket.create_connection((served.host, served.port), DEADLINE_S) as sock:
                sock.sendall(payload)
                said = _answer(sock)
            assert said.startswith(b"HTTP/1.1 " + status), said[:300]


def test_a_body_dribbled_or_never_sent_is_answered_408(tmp_path: Path) -> None:
    with console_in_thread(_store(tmp_path / "runs.sqlite3")) as served:
        sock = served.connect()
        sock.sendall(
            f"POST /api/runs/r1/send HTTP/1.1\r\nHost: 127.0.0.1:{served.port}\r\n"
            f"X-Console-Token: {TOKEN}\r\nOrigin: http://127.0.0.1:{served.port}\r\n"
            "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
            '{"text": "'.encode()
        )
        said = _answer(sock)
        assert said.startswith(b"HTTP/1.1 408"), said[:300]
        assert b"the body did not come whole within 1 s" in said
        sock.close()
        assert served.get("/api/session")[0] == 200


# ---- clients that read nothing --------------------------------------------------------------


def test_a_stream_whose_client_reads_nothing_is_reset_and_forgotten(tmp_path: Path) -> None:
    # without the stall deadline the server waited for room to write for ever, keeping the
    # socket, its buffers, the stream's task and its inbox (each change kept for it)
    path = _store(tmp_path / "runs.sqlite3")
    with console_in_thread(path) as served:
        stuck = _open_stream(served.port, TOKEN, small_buffer=True)
        reading = _open_stream(served.port, TOKEN)
        wait_for(lambda: len(served.console.hub.inboxes) == 2, "both streams open")
        with _reading_meanwhile(reading, b'"id":"big11"'):  # the reading page gets every change
            _write_big_runs(path, 12, 1 << 20)  # 12 MB: more than every buffer on the way holds
        wait_for(lambda: _tcp_state(stuck) != TCP_ESTABLISHED, "the server to drop the stream")
        assert _tcp_state(reading) == TCP_ESTABLISHED  # the page that reads goes on
        wait_for(lambda: len(served.console.hub.inboxes) == 1, "the stuck stream's inbox to go")
        said = _answer(stuck)
        assert not said.endswith(b"0\r\n\r\n")  # cut off, not ended as a response
        assert served.get("/api/session")[0] == 200
        stuck.close()
        reading.close()


def test_ctrl_c_with_a_client_reading_nothing_exits_quietly(tmp_path: Path) -> None:
    # the stream's last chunk could not be written: uvicorn waited its graceful timeout,
    # then cancelled it saying "Cancel 1 running task(s)" and "Exception in ASGI application"
    path = _store(tmp_path / "runs.sqlite3")
    with serving(path) as served:  # consolekit: SIGINT, exit 0, nothing said but serve's lines
        stuck = _open_stream(served.port, served.token, small_buffer=True)
        reading = _open_stream(served.port, served.token)
        with _reading_meanwhile(reading, b'"id":"big11"'):
            _write_big_runs(path, 12, 1 << 20)
        assert _tcp_state(stuck) == TCP_ESTABLISHED  # still held when Ctrl-C comes
    stuck.close()
    reading.close()


def test_ctrl_c_with_a_body_still_coming_exits_quietly(tmp_path: Path) -> None:
    # the request waited for its body (up to the body deadline) past uvicorn's graceful
    # timeout, which then cancelled it: "Cancel 1 running task(s)" on the terminal
    path = _store(tmp_path / "runs.sqlite3")
    with serving(path) as served:  # consolekit: SIGINT, exit 0, nothing said but serve's lines
        sock = socket.create_connection((served.host, served.port), DEADLINE_S)
        sock.sendall(
            f"POST /api/runs/r1/send HTTP/1.1\r\nHost: 127.0.0.1:{served.port}\r\n"
            f"X-Console-Token: {served.token}\r\nOrigin: http://127.0.0.1:{served.port}\r\n"
            "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
            '{"text": "'.encode()
        )
        assert served.request("GET", "/api/session", headers=served.authorized())[0] == 200
        assert _tcp_state(sock) == TCP_ESTABLISHED  # still waiting for its body
    assert _answer(sock) == b""  # dropped without an answer: the server is gone
    sock.close()


# ---- more than it serves ---------------------------------------------------------------------


def test_streams_past_max_streams_are_answered_503_naming_the_flag(tmp_path: Path) -> None:
    path = _store(tmp_path / "runs.sqlite3")
    with serving(path, "--max-streams", "2") as served:
        open_ = [_open_stream(served.port, served.token) for _ in range(2)]
        assert _stream_status(served) == 503  # (without the bound: a third stream, open)
        status, headers, body = served.request("GET", "/api/stream", headers=served.authorized())
        assert status == 503, body
        assert b"--max-streams" in body and headers["content-type"] == "application/json"
        assert served.request("GET", "/api/runs", headers=served.authorized())[0] == 200
        open_.pop().close()  # one page closed: a stream may open again
        wait_for(lambda: _stream_status(served) == 200, "a stream to be accepted again")


def test_a_head_request_for_the_stream_holds_no_stream(tmp_path: Path) -> None:
    # `curl -I .../api/stream`: answered with the stream's head, and no stream opened (one
    # was, and kept its slot after the client had gone: --max-streams of them and no page
    # could follow changes again)
    path = _store(tmp_path / "runs.sqlite3")
    with serving(path, "--max-streams", "1") as served:
        for _ in range(3):
            status, headers, _ = served.request("HEAD", "/api/stream", headers=served.authorized())
            assert status == 200 and headers["content-type"].startswith("text/event-stream")
        assert _stream_status(served) == 200


def _stream_status(served: Served) -> int:
    sock = socket.create_connection((served.host, served.port), timeout=DEADLINE_S)
    with sock:
        sock.sendall(
            f"GET /api/stream HTTP/1.1\r\nHost: 127.0.0.1:{served.port}\r\n"
            f"Authorization: Bearer {served.token}\r\n\r\n".encode()
        )
        head = b""
        while b"\r\n" not in head:
            data = sock.recv(4096)
            assert data, head
            head += data
    return int(head.split(b" ", 2)[1])


def test_connections_past_max_connections_are_answered_503_naming_the_flag(
    tmp_path: Path,
) -> None:
    path = _store(tmp_path / "runs.sqlite3")
    with serving(path, "--max-connections", "2") as served:
        streams = [_open_stream(served.port, served.token) for _ in range(2)]
        status, headers, body = served.request("GET", "/api/runs", headers=served.authorized())
        assert status == 503, body
        assert b"--max-connections" in body and headers["connection"] == "close"
        streams.pop().close()
        wait_for(
            lambda: served.request("GET", "/api/runs", headers=served.authorized())[0] == 200,
            "a connection to be served again",
        )
        streams.pop().close()


def test_max_connections_and_streams_take_whole_numbers_of_at_least_one(tmp_path: Path) -> None:
    for flag, value in (("--max-connections", "0"), ("--max-streams", "many")):
        done = subprocess.run(
            [sys.executable, "-m", "subagents.cli.main", "serve", "--state",
             str(tmp_path / "runs.sqlite3"), "--port", "0", flag, value],
            capture_output=True, text=True, timeout=DEADLINE_S,
        )  # fmt: skip
        assert done.returncode == 2, done
        assert flag in done.stderr and "at least 1" in done.stderr
    assert not (tmp_path / "runs.sqlite3").exists()  # refused before anything was opened


# ---- the store replaced -------------------------------------------------------------------


def test_streams_end_once_the_store_is_no_longer_followed(tmp_path: Path) -> None:
    path = _store(tmp_path / "runs.sqlite3")
    with console_in_thread(path) as served:
        stream = _open_stream(served.port, TOKEN)
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        _store(path)  # another store where it was
        said = _answer(stream)  # the stream ends by itself...
        assert b"event: reload" in said  # ...once its page is told to read again
        assert said.endswith(b"0\r\n\r\n")  # a whole response, not cut off
        wait_for(lambda: not served.console.hub.inboxes, "the stream's inbox to go")
        assert served.get("/api/stream")[0] == 503  # a new one is told why not
        stream.close()


# ---- strangers on the port ----------------------------------------------------------------

TCP_CLOSE_WAIT = 8
"""The client's side once the server closed it."""


def _flood(host: str, port: int, count: int, source: str = "127.0.0.1") -> list[socket.socket]:
    """``count`` connections without the token, held open: half send nothing, half the start
    of a request head and never its end."""
    held = []
    for i in range(count):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.settimeout(DEADLINE_S)
        sock.bind((source, 0))
        sock.connect((host, port))
        if i % 2:
            sock.sendall(f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Pad: a".encode())
        held.append(sock)
    return held


def test_a_strangers_flood_of_connections_leaves_the_owner_served(tmp_path: Path) -> None:
    # 300 connections without the token, idle or dribbling, from the owner's own address
    # (loopback): they filled --max-connections (128) and the owner's page got 503
    path = _store(tmp_path / "runs.sqlite3")
    with serving(path) as served:
        flood = _flood(served.host, served.port, 300)
        status, _, body = served.request("GET", "/api/runs", headers=served.authorized())
        assert status == 200, body
        cookie = {"Cookie": f"subagents-console-{served.port}={served.token}"}
        assert served.request("GET", "/", headers=cookie)[0] == 200  # the page, as a browser
        held = sum(_tcp_state(sock) == TCP_ESTABLISHED for sock in flood)
        assert held >= 200, held  # the flood is still held while the owner is served
        for sock in flood:
            sock.close()


def test_a_flood_from_another_address_closes_its_own_connections_first(tmp_path: Path) -> None:
    # the owner's connection, open and idle, older than every one of the flood's: one
    # stranger's address past the bound closes its own oldest, not the owner's
    limits = Limits(strangers=8, head_timeout_s=600.0)
    with console_in_thread(_store(tmp_path / "runs.sqlite3"), limits) as served:
        owners = served.connect()
        flood = _flood("127.0.0.1", served.port, 20, source="127.0.0.2")
        wait_for(
            lambda: sum(_tcp_state(sock) == TCP_ESTABLISHED for sock in flood) == 8 - 1,
            "the flood's oldest to be closed, down to the bound with the owner's",
        )
        owners.sendall(
            f"GET /api/session HTTP/1.1\r\nHost: 127.0.0.1:{served.port}\r\n"
            f"Authorization: Bearer {TOKEN}\r\n\r\n".encode()
        )
        said = owners.recv(65536)
        assert said.startswith(b"HTTP/1.1 200"), said[:300]
        owners.close()
        for sock in flood:
            sock.close()


def test_a_strangers_request_is_answered_and_its_connection_closed(tmp_path: Path) -> None:
    # kept alive, each connection a stranger opened would hold a slot for as long as it
    # sends a request now and then
    with console_in_thread(_store(tmp_path / "runs.sqlite3")) as served:
        with served.connect() as sock:
            sock.sendall(
                f"GET /api/runs HTTP/1.1\r\nHost: 127.0.0.1:{served.port}\r\n\r\n".encode()
            )
            said = _answer(sock)  # the answer, then the end: the server closed it
        assert said.startswith(b"HTTP/1.1 401"), said[:300]
        assert b"connection: close" in said.lower()


def test_a_websocket_upgrade_is_a_strangers_request_like_any_other(tmp_path: Path) -> None:
    # with a websocket library installed (uvicorn[standard] brings websockets), uvicorn
    # handed an Upgrade request to its websocket protocol: the connection's close was never
    # counted, and `strangers` such requests left ghosts filling the strangers' bound for
    # ever (every new connection, the owner's too, then closed before its request came)
    limits = Limits(strangers=4, head_timeout_s=600.0)
    upgrade = (
        "GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
        "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
        "Sec-WebSocket-Version: 13\r\n\r\n"
    )
    with console_in_thread(_store(tmp_path / "runs.sqlite3"), limits) as served:
        for _ in range(2 * limits.strangers):
            with served.connect() as sock:
                sock.sendall(upgrade.format(port=served.port).encode())
                said = _answer(sock)
            assert said.startswith(b"HTTP/1.1 401"), said[:300]  # the guard's, over HTTP
        with served.connect() as sock:
            sock.sendall(
                f"GET /api/session HTTP/1.1\r\nHost: 127.0.0.1:{served.port}\r\n"
                f"Authorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n".encode()
            )
            said = _answer(sock)
        assert said.startswith(b"HTTP/1.1 200"), said[:300]
