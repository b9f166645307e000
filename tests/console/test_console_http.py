"""`subagents serve` over plain HTTP: who is refused and why (console/guard.py), what is
answered to the one who may ask, and the command's own checks. The real command in a
subprocess, a real store, ``http.client`` sending exactly the headers each case needs."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from consolekit import Served, serving

from subagents.messages import Lease, RunRecord, RunStatus
from subagents.store.sqlite import SQLiteStore

HOST = "elsewhere:1:x"
PAGES = ["/", "/runs/r1", "/static/tree.js", "/api/session", "/api/runs", "/api/runs/r1"]


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("console") / "runs.sqlite3"
    with SQLiteStore(path) as store:
        # r1's host is alive (a lease another machine keeps: not judged by its pid here)
        store.acquire_lease(Lease(owner=HOST, host="elsewhere", pid=1, expires_at=1e12))
        for run_id, owner in (("r1", HOST), ("gone1", "vanished:2:y")):
            store.save_run(
                RunRecord(
                    run_id=run_id, agent="worker", task="<b>bold</b>", root_run_id=run_id,
                    status=RunStatus.RUNNING, created_at=1.0, started_at=1.0, owner=owner,
                )
            )  # fmt: skip
    return path


@pytest.fixture(scope="module")
def served(state: Path) -> Iterator[Served]:
    with serving(state) as served:
        yield served


def test_every_request_without_the_token_is_refused(served: Served) -> None:
    for path in [*PAGES, "/api/stream"]:
        status, headers, body = served.request("GET", path)
        assert status == 401, path
        assert b"token" in body
        assert "script-src 'self'" in headers["content-security-policy"]
        wrong = {"Authorization": "Bearer " + "0" * len(served.token)}
        assert served.request("GET", path, headers=wrong)[0] == 401, path
        assert served.request("GET", path + "?token=nope")[0] == 401, path
    status, _, body = served.request("GET", "/api/runs", headers=served.authorized())
    assert status == 200
    assert {row["id"] for row in json.loads(body)["rows"]} == {"r1", "gone1"}


def test_a_request_naming_another_host_is_refused_even_with_the_token(served: Served) -> None:
    """DNS rebinding: evil.example resolved to 127.0.0.1 reaches the port, but names itself."""
    for host in ("evil.example", f"evil.example:{served.port}", f"127.0.0.1:{served.port + 1}"):
        headers = {**served.authorized(), "Host": host}
        status, _, body = served.request("GET", "/api/runs", headers=headers)
        assert status == 403, host
        assert b"DNS rebinding" in body
    for host in (f"localhost:{served.port}", f"127.0.0.1:{served.port}"):
        headers = {**served.authorized(), "Host": host}
        assert served.request("GET", "/api/runs", headers=headers)[0] == 200, host


def test_the_token_in_the_url_becomes_a_cookie_and_leaves_the_address(served: Served) -> None:
    status, headers, _ = served.request("GET", f"/runs/r1?token={served.token}&x=1")
    assert status == 303
    assert headers["location"] == "/runs/r1?x=1"
    cookie = headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    pair = cookie.split(";")[0]
    assert pair == f"subagents-console-{served.port}={served.token}"
    status, headers, body = served.request("GET", "/", headers={"Cookie": pair})
    assert status == 200 and b"<table" in body
    assert headers["x-frame-options"] == "DENY"
    assert "'unsafe-inline'" not in headers["content-security-policy"]


def test_a_write_needs_the_token_in_a_header_and_the_consoles_own_origin(
    served: Served, state: Path
) -> None:
    cookie = f"subagents-console-{served.port}={served.token}"
    same = f"http://127.0.0.1:{served.port}"
    json_type = {"Content-Type": "application/json"}
    refused = {
        "the cookie only (a cross-site form sends it)": {"Cookie": cookie, "Origin": same},
        "another origin": {"X-Console-Token": served.token, "Origin": "http://evil.example"},
        "another origin's page": {
            "X-Console-Token": served.token,
            "Referer": "http://evil.example/page",
        },
        "no origin at all": {"X-Console-Token": served.token},
        "no token": {"Origin": same},
    }
    for why, headers in refused.items():
        status, _, _ = served.request(
            "POST", "/api/runs/r1/stop", headers={**json_type, **headers}, body=b"{}"
        )
        assert status in (401, 403), why
    with SQLiteStore(state) as store:
        assert store.take_commands() == []  # nothing was posted
    headers = {**json_type, "X-Console-Token": served.token, "Origin": same}
    status, _, body = served.request("POST", "/api/runs/r1/stop", headers=headers, body=b"{}")
    assert status == 200, body
    assert json.loads(body)["kind"] == "stop"
    with SQLiteStore(state) as store:
        (command,) = store.take_commands()
    assert (command.kind, command.run_id) == ("stop", "r1")


def test_stopping_a_run_whose_host_is_gone_ends_it_now(served: Served, state: Path) -> None:
    """As `subagents stop` does: no host will take a command, so the run is cancelled in
    the store at once, and nothing is left waiting for a resume."""
    headers = {
        "Content-Type": "application/json",
        "X-Console-Token": served.token,
        "Origin": f"http://127.0.0.1:{served.port}",
    }
    status, _, body = served.request("POST", "/api/runs/gone1/stop", headers=headers, body=b"{}")
    assert status == 200, body
    assert "cancelled in the store now" in json.loads(body)["message"]
    with SQLiteStore(state) as store:
        record = store.get_run("gone1")
        assert record is not None and record.status is RunStatus.CANCELLED
        assert [c.run_id for c in store.take_commands()] == []


def test_a_write_of_nothing_or_to_no_run_is_refused_saying_why(served: Served) -> None:
    headers = {
        "Content-Type": "application/json",
        "X-Console-Token": served.token,
        "Origin": f"http://127.0.0.1:{served.port}",
    }
    status, _, body = served.request("POST", "/api/runs/r1/send", headers=headers, body=b"{}")
    assert (status, json.loads(body)["error"]) == (400, "the text is empty: nothing to send")
    status, _, body = served.request("POST", "/api/runs/nope/stop", headers=headers, body=b"{}")
    assert (status, json.loads(body)["error"]) == (404, "no run nope in the store")
    form = {**headers, "Content-Type": "application/x-www-form-urlencoded"}
    assert served.request("POST", "/api/runs/r1/stop", headers=form, body=b"a=1")[0] == 415


def _serve(*options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "subagents.cli.main", "serve", *options],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_an_address_that_is_not_loopback_needs_expose(state: Path) -> None:
    done = _serve("--state", str(state), "--host", "192.0.2.7", "--port", "0")
    assert done.returncode == 2
    assert "is not loopback" in done.stderr and "--expose" in done.stderr
    done = _serve("--state", str(state), "--host", "0.0.0.0", "--expose")
    assert done.returncode == 2
    assert "give the one address people will open" in done.stderr


def test_a_store_that_is_not_there_is_named_and_nothing_is_served(tmp_path: Path) -> None:
    done = _serve("--state", str(tmp_path / "nothing.sqlite3"), "--port", "0")
    assert done.returncode == 1
    assert "nothing.sqlite3: no run store there" in done.stderr
    assert not (tmp_path / "nothing.sqlite3").exists()


def test_without_the_console_extra_the_command_says_what_to_install(state: Path) -> None:
    """Starlette made unimportable in the command's interpreter, as when the `console` extra
    is not installed: one line naming the extra, exit 1, no traceback."""
    blocker = (
        "import sys, importlib.abc\n"
        "class Blocked(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name.split('.')[0] in ('starlette', 'uvicorn', 'sse_starlette'):\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, Blocked())\n"
        "from subagents.cli.main import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", blocker, "serve", "--state", str(state), "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert "pip install 'subagents[console]'" in done.stderr
    assert "Traceback" not in done.stderr
