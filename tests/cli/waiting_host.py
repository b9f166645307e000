"""A host whose run waits in a long Bash command (the agent ``waiter``), for the tests that
stall or kill that host: tests/cli/test_cli_lease_line.py and
tests/adversary/test_stalled_host_command.py (one copy: ``duplicates`` found two).

The command writes ``start`` to ``log``, its pid (as its PID namespace shows it and outside,
``ns_pids``) to ``pid``, waits for a file ``go``, then writes ``end``."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

from clikit import Cli

from ns_pids import NS, outer

WAITER = f"""---
name: waiter
description: Starts a long Bash command, then says what it got.
tools: Bash
script:
  - tool_calls:
      - name: Bash
        input:
          command: "echo start >> log; echo $$ {NS} > pid; while [ ! -e go ]; do sleep 0.05; done; echo end >> log"
  - text: "waiter got: {{result0}}"
---
You wait.
"""  # noqa: E501


def waiting_cli(tmp_path: Path) -> Iterator[Cli]:
    """A ``Cli`` with the ``waiter`` agent and a list ``hosts`` of the host pids a test
    started: at the end its command is let go and each host still there is killed."""
    given = Cli(tmp_path)
    (given.agents / "waiter.md").write_text(WAITER, encoding="utf-8")
    hosts: list[int] = []
    given.hosts = hosts  # type: ignore[attr-defined]
    yield given
    (given.root / "go").write_text("")  # a command left ends by itself
    for pid in hosts:
        if pid > 0 and not gone(pid):
            os.kill(pid, signal.SIGCONT)
            os.kill(pid, signal.SIGKILL)


def gone(pid: int) -> bool:
    """Whether no process has ``pid`` (checked > 0: ``kill(0)``/``kill(-1)`` are others)."""
    assert pid > 0
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def command_pid(cli: Cli) -> int | None:
    """The waiter's command's pid outside its namespace, once it has said it."""
    said = cli.root / "pid"
    if not said.exists() or not said.read_text().strip():
        return None
    pid = outer(said.read_text(), said.stat().st_mtime)
    assert pid > 0
    return pid
