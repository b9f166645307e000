"""Helpers for the `subagents` command tests: a team of scripted agents in a tmp dir, and the
real command run against a store in a tmp dir: in a subprocess, or, for a command that only
reads or answers the store, its entry point called in this process (``in_process``), isolated
as a subprocess would be and answered the same way.

Every wait polls an observable condition (the store, read as `subagents ps --json` reads it)
until a deadline; nothing sleeps a fixed time.
"""

from __future__ import annotations

import contextlib
import os
import pty
import re
import select
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import msgspec
from in_process import run_main

from subagents.cli.main import _command_in
from subagents.cli.ps_cmd import ps_row
from subagents.store.leases import Liveness
from subagents.store.opening import open_location

T = TypeVar("T")

IN_PROCESS = frozenset(
    {"ps", "info", "log", "tree", "stop", "send", "prune", "approvals", "approve", "deny", "wait"}
    | {"events", "agents", "completion"}
)
"""The commands ``Cli(...)`` runs in this process: each reads the store or writes an answer,
a stop or a mail into it, and ends; none starts a runtime, forks, takes a terminal or a signal
(``events`` and ``log`` follow the store only when asked: ``Cli.start`` runs those). Every
other (``run``, ``resume``, ``continue``, ``demo``, ``doctor``, ``serve``, ``attach``, none at
all: ``--version``) runs in a subprocess, as does one on a Ray cluster's store
(``runs_here``) and any command through ``Cli.process``."""

DEADLINE_S = 90.0
"""A hang guard for each wait and command (a passing one returns at once; on a loaded machine
a command is an interpreter start and a store open, a run several of those)."""
POLL_S = 0.05
"""Between two reads of the store while waiting: leaves the CPU to the runs waited for."""

TEAM: dict[str, str] = {
    # the lead dispatches one worker and reports what it said
    "lead.md": """---
name: lead
description: Dispatches one worker and reports what it said.
tools: spawn_subagent
script:
  - text: "dispatching"
    tool_calls:
      - name: spawn_subagent
        input: {agent: worker, task: "work on {task}"}
  - text: "lead got: {result0_result}"
---
You lead.
""",
    # the worker waits (up to a minute) for mail and answers with it
    "worker.md": """---
name: worker
description: Waits for mail, then answers with it.
tools: wait_for_message
script:
  - text: "waiting for mail"
    tool_calls:
      - name: wait_for_message
        input: {timeout: 60}
  - text: "worker heard: {mail_content}"
---
You work.
""",
    "quick.md": """---
name: quick
description: Answers at once.
script:
  - text: "quick answer to {task}"
    usage: {input_tokens: 10, output_tokens: 5}
---
You answer.
""",
    "slow.md": """---
name: slow
description: Takes its time (an hour) before answering.
script:
  - text: "slow answer"
    delay: 3600
---
You are slow.
""",
    "boss.md": """---
name: boss
description: Hands the task to slow.
tools: spawn_subagent
script:
  - tool_calls:
      - name: spawn_subagent
        input: {agent: slow, task: "{task}"}
  - text: "boss got: {result0_result}"
---
You delegate.
""",
    "pair.md": """---
name: pair
description: Asks quick two things in parallel and joins the answers.
tools: spawn_subagent
script:
  - text: "asking twice"
    tool_calls:
      - name: spawn_subagent
        input: {agent: quick, task: "first {task}"}
      - name: spawn_subagent
        input: {agent: quick, task: "second {task}"}
  - text: "joined: {result0_result} + {result1_result}"
---
You pair.
""",
    "failer.md": """---
name: failer
description: Fails.
script:
  - error: {kind: boom, message: "scripted failure"}
---
You fail.
""",
    "spender.md": """---
name: spender
description: Spends many tokens per step.
script:
  - text: "step one"
    usage: {input_tokens: 5000, output_tokens: 100}
    tool_calls:
      - name: check_mailbox
        input: {}
  - text: "step two"
    usage: {input_tokens: 5000, output_tokens: 100}
---
You spend.
""",
}


@contextlib.contextmanager
def write_lock_held(path: Path) -> Iterator[None]:
    """The SQLite file's write lock, held while inside (as a host stopped mid-write holds
    it): a command that writes meets a busy store."""
    lock = sqlite3.connect(path, isolation_level=None)
    lock.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        lock.execute("ROLLBACK")
        lock.close()


STARTUP = ("LANG", "LC_ALL", "LC_CTYPE", "PYTHONIOENCODING", "PYTHONUTF8", "PYTHONPATH")
"""What an interpreter reads once, as it starts (its locale and stdio encoding, where it
imports from): a command given its own runs in a subprocess, which reads them."""


def runs_here(args: Sequence[str], env: dict[str, str]) -> bool:
    """Whether `subagents ARGS` runs in this process: its command is one of ``IN_PROCESS``
    and it reads no Ray cluster's store (``--ray``, ``$SUBAGENTS_RAY_ADDRESS``): that joins
    the cluster as a driver, which a process does once and keeps (``cluster.connect``: a
    driver already there wins over the address named), so it runs in a subprocess. So does
    one given ``STARTUP`` settings of its own, and a shell's completion request
    (``$_ARGCOMPLETE``: argcomplete ends the process with ``os._exit``)."""
    on_ray = any(a == "--ray" or a.startswith("--ray=") for a in args)
    return (
        _command_in(args) in IN_PROCESS
        and not on_ray
        and not env.get("SUBAGENTS_RAY_ADDRESS", "").strip()
        and "_ARGCOMPLETE" not in env
        and all(env.get(name) == os.environ.get(name) for name in STARTUP)
    )


def run_command(
    args: Sequence[str],
    *,
    env: dict[str, str],
    cwd: Path,
    stdin: str | None = None,
    timeout: float = DEADLINE_S,
) -> subprocess.CompletedProcess[str]:
    """`subagents ARGS` with ``env`` as its whole environment, in ``cwd``: in this process
    when its command is one of ``IN_PROCESS`` (``timeout`` is then pytest-timeout's), else
    in a subprocess; its exit code, stdout and stderr either way."""
    if runs_here(args, env):
        return run_main(args, env=env, cwd=cwd, stdin=stdin)
    return subprocess.run(
        [sys.executable, "-m", "subagents.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        input=stdin,
        env=env,
        cwd=cwd,
    )


def write_team(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in TEAM.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


class Cli:
    """The `subagents` command with a private home, state dir and team (no API key)."""

    def __init__(self, root: Path, database: str | None = None) -> None:
        """``database``: a PostgreSQL store's URL, given to every command as
        ``$SUBAGENTS_STATE`` (else the SQLite file of the state directory)."""
        self.root = root
        self.agents = write_team(root / "team")
        self.state = root.parent / f"{root.name}-state" / "runs.sqlite3"
        """Beside ``root``, the commands' working directory (their runs' workspace): a store
        inside it would be in reach of the runs' commands, and the runtime refuses that."""
        self.database = database
        home = root / "home"
        home.mkdir(parents=True, exist_ok=True)
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("ANTHROPIC_API_KEY", "NO_COLOR", "FORCE_COLOR")
            and not k.startswith("SUBAGENTS_")
        }
        env.update(HOME=str(home), SUBAGENTS_STATE_DIR=str(self.state.parent), COLUMNS="200")
        if database is not None:
            env["SUBAGENTS_STATE"] = database
        self.env = env

    def store(self) -> Any:
        """The store every command of this ``Cli`` uses, opened here (``with cli.store() as
        store``): the SQLite file of its state directory, or its database."""
        return open_location(self.state if self.database is None else self.database)

    def argv(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "subagents.cli.main", *args]

    def __call__(
        self,
        *args: str,
        timeout: float = DEADLINE_S,
        stdin: str | None = None,
        env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """The command's exit code, stdout and stderr: run in this process when it is one of
        ``IN_PROCESS`` (``timeout`` is then pytest-timeout's), else in a subprocess."""
        environment = {**self.env, **(env or {})}
        return run_command(args, env=environment, cwd=self.root, stdin=stdin, timeout=timeout)

    def raw(
        self,
        *args: str | bytes,
        stdin: bytes = b"",
        timeout: float = DEADLINE_S,
        env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[bytes]:
        """The command with bytes in and out (argv words and stdin that may not be UTF-8, its
        output undecoded): in this process for ``IN_PROCESS``'s commands, as ``__call__``."""
        words = [os.fsdecode(a) for a in args]
        environment = {**self.env, **(env or {})}
        if runs_here(words, environment):
            return run_main(args, env=environment, cwd=self.root, stdin=stdin, text=False)
        return subprocess.run(
            [*self.argv(), *args],
            input=stdin,
            capture_output=True,
            env=environment,
            cwd=self.root,
            timeout=timeout,
        )

    def process(
        self,
        *args: str,
        timeout: float = DEADLINE_S,
        stdin: str | None = None,
        env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """The command in a subprocess of its own, whatever it is: where the process is what
        is tested (its exit under a real interpreter, what it imports, a second writer)."""
        return subprocess.run(
            self.argv(*args),
            capture_output=True,
            text=True,
            timeout=timeout,
            input=stdin,
            env={**self.env, **(env or {})},
            cwd=self.root,
        )

    def json(self, *args: str) -> Any:
        proc = self(*args, "--json")
        assert proc.returncode == 0, proc.stderr
        return msgspec.json.decode(proc.stdout)

    def start(self, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        """The command in the background (stdout and stderr captured)."""
        return subprocess.Popen(
            self.argv(*args),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**self.env, **(env or {})},
            cwd=self.root,
        )

    def run_team(self, agent: str, task: str, *extra: str) -> subprocess.Popen[str]:
        return self.start("run", agent, task, "--agents", str(self.agents), "--json", *extra)

    def runs(self) -> list[dict[str, Any]]:
        """The rows `subagents ps --all --json` prints, read from the store in this process.

        Waits poll this often; a command per poll (an interpreter start each) would take the
        CPU the runs being waited for need. What `ps` itself prints is tested through
        ``cli.json("ps", ...)``."""
        if self.database is None and not self.state.exists():
            return []
        where: Path | str = self.state if self.database is None else self.database
        with open_location(where) as store:  # type: ignore[attr-defined]
            alive = Liveness(store.leases())
            records = store.list_runs(include_archived=True)
        rows: list[dict[str, Any]] = msgspec.to_builtins(
            [ps_row(n, r, alive) for n, r in enumerate(records, 1)]
        )
        return rows

    def wait_runs(
        self,
        predicate: Callable[[list[dict[str, Any]]], T | None],
        what: str,
        proc: subprocess.Popen[str] | None = None,
    ) -> T:
        """Poll `ps --all --json` until ``predicate(rows)`` is truthy; its value."""
        deadline = time.monotonic() + DEADLINE_S
        rows: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            if proc is not None and proc.poll() is not None:
                _out, err = proc.communicate()
                raise AssertionError(f"the run exited ({proc.returncode}) before {what}: {err}")
            rows = self.runs()
            found = predicate(rows)
            if found:
                return found
            time.sleep(POLL_S)  # the pace of the polling, not what is waited for
        raise AssertionError(f"timed out waiting for {what}; runs: {rows}")


def by_agent(rows: list[dict[str, Any]], agent: str, status: str) -> dict[str, Any] | None:
    """The row of ``agent`` if it has ``status``."""
    for row in rows:
        if row["agent"] == agent and row["status"] == status:
            return row
    return None


def finish(proc: subprocess.Popen[str], timeout: float = DEADLINE_S) -> tuple[int, str, str]:
    """Wait for a background command; its exit code, stdout and stderr."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"the command did not end within {timeout} s: {err}") from None
    return proc.returncode, out, err


SGR = re.compile(r"\x1b\[[0-9;]*m")
"""An ANSI colour/style sequence (cursor movement of a live display is not colour)."""


def on_terminal(
    cli: Cli, *args: str, env: dict[str, str] | None = None, timeout: float = DEADLINE_S
) -> tuple[int, str]:
    """Run the command with stdout and stderr on a pseudo-terminal; exit code and output."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        cli.argv(*args),
        stdin=subprocess.DEVNULL,
        stdout=slave,
        stderr=slave,
        env={**cli.env, "TERM": "xterm-256color", **(env or {})},
        cwd=cli.root,
    )
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                break
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        code = proc.wait(timeout=max(0.1, deadline - time.monotonic()))
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return code, b"".join(chunks).decode("utf-8", "replace")
