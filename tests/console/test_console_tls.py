"""`subagents serve` off loopback: the token must not travel in clear by default. ``--expose``
needs ``--tls-cert`` (HTTPS, uvicorn's TLS) or ``--plain-http`` (said loudly at start). The
real command in a subprocess (``consolekit.serving``), a certificate made by ``openssl``."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from consolekit import DEADLINE_S, serving

from subagents.messages import RunRecord, RunStatus
from subagents.store.sqlite import SQLiteStore


def _store(path: Path) -> Path:
    with SQLiteStore(path) as store:
        store.save_run(
            RunRecord(
                run_id="r1", agent="worker", task="t", root_run_id="r1",
                status=RunStatus.RUNNING, created_at=1.0, started_at=1.0,
            )
        )  # fmt: skip
    return path


def _certificate(folder: Path) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("makes its certificate with openssl, which is not installed")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
         "-subj", "/CN=127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=DEADLINE_S,
    )  # fmt: skip
    return cert, key


def _serve(*options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "subagents.cli.main", "serve", "--port", "0", *options],
        capture_output=True, text=True, timeout=DEADLINE_S, check=False,
    )  # fmt: skip


def test_expose_over_plain_http_is_refused_unless_acknowledged(tmp_path: Path) -> None:
    done = _serve("--state", str(tmp_path / "runs.sqlite3"), "--host", "192.0.2.7", "--expose")
    assert done.returncode == 2, done
    assert "--tls-cert" in done.stderr and "--plain-http" in done.stderr
    assert "in clear" in done.stderr
    assert not (tmp_path / "runs.sqlite3").exists()  # refused before anything was opened


def test_a_certificate_that_is_not_one_is_named_at_start(tmp_path: Path) -> None:
    state = str(tmp_path / "runs.sqlite3")
    bogus = tmp_path / "bogus.pem"
    bogus.write_text("not a certificate\n")
    for options, named in (
        (["--tls-cert", str(bogus)], str(bogus)),
        (["--tls-cert", str(tmp_path / "missing.pem")], "missing.pem"),
        (["--tls-key", str(bogus)], "give the certificate too"),
        (["--tls-cert", str(bogus), "--plain-http"], "not allowed with argument --tls-cert"),
    ):
        done = _serve("--state", state, *options)
        assert done.returncode == 2, done
        assert named in done.stderr, done.stderr


def test_with_a_certificate_the_console_is_served_over_https(tmp_path: Path) -> None:
    cert, key = _certificate(tmp_path)
    path = _store(tmp_path / "runs.sqlite3")
    with serving(path, "--tls-cert", str(cert), "--tls-key", str(key)) as served:
        assert served.url.startswith("https://127.0.0.1:")
        status, headers, _ = served.request("GET", f"/?token={served.token}")
        assert status == 303 and "Secure" in headers["set-cookie"]  # never sent over http
        assert served.request("GET", "/api/runs", headers=served.authorized())[0] == 200
        write = {**served.authorized(), "Content-Type": "application/json"}
        plain_origin = {**write, "Origin": f"http://127.0.0.1:{served.port}"}
        status, _, body = served.request("POST", "/api/runs/r1/stop", headers=plain_origin)
        assert status == 403, body  # the page's origin is https://
        own_origin = {**write, "Origin": f"https://127.0.0.1:{served.port}"}
        status, _, body = served.request(
            "POST", "/api/runs/r1/stop", headers=own_origin, body=b"{}"
        )
        assert status == 200, body
        with socket.create_connection((served.host, served.port), DEADLINE_S) as sock:
            sock.sendall(  # plain HTTP to the HTTPS port: no answer in clear
                f"GET /api/runs HTTP/1.1\r\nHost: 127.0.0.1:{served.port}\r\n"
                f"Authorization: Bearer {served.token}\r\n\r\n".encode()
            )
            said = sock.recv(65536)
        assert not said.startswith(b"HTTP/1.1 200"), said[:200]


def _outward_address() -> str | None:
    """An address of this machine that is not loopback, if it has one (no packet sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))
        except OSError:
            return None
        address: str = probe.getsockname()[0]
    return None if address.startswith("127.") else address


def test_exposed_it_says_at_start_whether_the_token_travels_in_clear(tmp_path: Path) -> None:
    address = _outward_address()
    if address is None:
        pytest.skip("this machine has no address but loopback to expose the console on")
    cert, key = _certificate(tmp_path)
    path = _store(tmp_path / "runs.sqlite3")
    with serving(path, "--host", address, "--expose", "--plain-http") as served:
        assert served.url.startswith(f"http://{address}:")
        assert served.request("GET", "/api/runs", headers=served.authorized())[0] == 200
        said = served.stderr.read_text()
        assert "WARNING: plain HTTP" in said and "unencrypted" in said, said
    tls = ("--tls-cert", str(cert), "--tls-key", str(key))
    with serving(path, "--host", address, "--expose", *tls) as served:
        assert served.url.startswith(f"https://{address}:")
        assert served.request("GET", "/api/runs", headers=served.authorized())[0] == 200
        said = served.stderr.read_text()
        assert "over HTTPS" in said and "WARNING" not in said, said
