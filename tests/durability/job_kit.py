"""What every crash job (``*_job.py``, run as a script by its test) does the same way: start
its root, or take it up when the store already holds it (the run after a kill), and write its
outcome for the test to read; and what its test does the same way: start it, and kill it
where it says."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec

from subagents.runtime import Runtime
from subagents.store.base import RunStore


def spawn_or_attach(rt: Runtime, store: RunStore, agent: str, task: str) -> Any:
    """The job's root run's handle: spawned, or attached to when a first run left one."""
    roots = [r for r in store.list_runs() if r.parent_run_id is None]
    return rt.spawn(agent, task) if not roots else rt.attach(roots[0].run_id)


def say(line: str) -> None:
    """Print ``line`` for the test to read, as ONE write to the process's stdout.

    Why not ``print(..., flush=True)``: ``print`` writes the text and its newline separately,
    so a marker printed by a run's thread while the main thread prints ``ready`` could reach
    the pipe as ``readyreplied`` and a lone newline; the test, waiting for the exact line,
    would never see it (CI hung on that). A single ``os.write`` of a short line to a pipe is
    atomic (POSIX: up to PIPE_BUF bytes), and nothing else of the job's is buffered before it.
    """
    sys.stdout.flush()
    os.write(sys.stdout.fileno(), (line + "\n").encode())


def write_outcome(out: str, outcome: Any) -> None:
    """``{"status", "result"}`` of ``outcome`` to the file ``out``."""
    Path(out).write_bytes(
        msgspec.json.encode({"status": str(outcome.status), "result": outcome.result})
    )


def start_job(job: Path, *args: object, text: bool = False) -> subprocess.Popen[Any]:
    """The crash job ``job`` started as a script with ``args``: offline (no API key), only
    errors logged, its output piped for the test to read (``text``: as str)."""
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    env["SUBAGENTS_LOG_LEVEL"] = "error"
    return subprocess.Popen(
        [sys.executable, str(job), *map(str, args)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=text,
    )


def kill_at(proc: subprocess.Popen[bytes], marker: bytes) -> None:
    """SIGKILL ``proc`` as soon as it prints the line ``marker``; fails, with the end of its
    stderr, if it ends without printing it."""
    assert proc.stdout is not None
    line = proc.stdout.readline()
    while line and line != marker:
        line = proc.stdout.readline()
    proc.send_signal(signal.SIGKILL)
    _, err = proc.communicate(timeout=10)
    assert line == marker, err.decode()[-3000:]


def run_root(agents: Any, store: RunStore, out: str, timeout: float = 60.0, **options: Any) -> int:
    """A job's whole run: a runtime over ``store`` with ``agents`` (and ``options``: a model,
    tools...), its root ``root`` on "go" started or taken up, ``ready`` printed (its test
    times its kill from there), its outcome written to ``out``; the exit status."""
    with Runtime(agents, store=store, command_poll_s=0, **options) as rt:
        handle = spawn_or_attach(rt, store, "root", "go")
        say("ready")
        outcome = handle.result(timeout=timeout)
    store.close()
    write_outcome(out, outcome)
    return 0
