"""Helpers for MCP tests: the real test server's configuration, and servers that misbehave."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ns_pids import outer
from polling import wait_until

SERVER_APP = Path(__file__).with_name("mcp_server_app.py")

START_WAIT_S = 300.0
"""How long a test server may take to start (an interpreter importing the mcp SDK): on two
loaded shared cores that took over the default 30 s. Only a start that never ends should
fail a test; how fast servers start is measured in benchmarks/mcp_hub.py."""


@pytest.fixture(autouse=True)
def _patient_server_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runtimes made in these tests (and the jobs they start, which inherit the environment)
    give a server ``START_WAIT_S`` to start (``MCP_TIMEOUT``, in milliseconds)."""
    monkeypatch.setenv("MCP_TIMEOUT", str(int(START_WAIT_S * 1000)))


def server_config(name: str = "testsrv", log: Path | None = None) -> dict[str, Any]:
    """``{command, args}`` that starts the test server with this interpreter."""
    args = [str(SERVER_APP), "--name", name]
    if log is not None:
        args += ["--log", str(log)]
    return {"command": sys.executable, "args": args}


def silent_server(tmp_path: Path) -> dict[str, Any]:
    """A process that starts and never speaks MCP (reads stdin, answers nothing)."""
    script = tmp_path / "silent.py"
    script.write_text("import sys\nfor _ in sys.stdin:\n    pass\n", encoding="utf-8")
    return {"command": sys.executable, "args": [str(script)]}


def dying_server(tmp_path: Path) -> dict[str, Any]:
    """A process that writes to stderr and exits before answering initialize."""
    script = tmp_path / "dying.py"
    script.write_text(
        "import sys\nprint('boom: missing API token', file=sys.stderr)\nsys.exit(2)\n",
        encoding="utf-8",
    )
    return {"command": sys.executable, "args": [str(script)]}


def server_pid(said: str) -> int:
    """The pid out here of what the server's ``pid`` tool (or its marker) said."""
    return outer(said)


def alive(pid: int) -> bool:
    """Whether a process exists (and is not a zombie)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def http_server(transport: str) -> Iterator[int]:
    """The test server over ``http`` (streamable HTTP) or ``sse``, on a free local port."""
    port = free_port()
    flag = "--http" if transport == "http" else "--sse"
    process = subprocess.Popen(
        [sys.executable, str(SERVER_APP), "--name", "remote", flag, str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:

        def listening() -> bool:  # it accepts connections (or has died)
            assert process.poll() is None, "the HTTP test server exited"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
            except OSError:
                return False
            return True

        wait_until(listening, "the HTTP test server listening", timeout=60, pace=0.05)
        yield port
    finally:
        process.terminate()
        process.wait(10)
