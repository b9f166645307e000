"""A run's end (``ProcessGroups.kill_run``) kills every command the run started, those
started while it runs included: a background shell started in that moment (a tool call
still going when the run was stopped) kept its process and its slot until the runtime
closed. Now a start during the end is refused (``RunEnding``), and a start already under
way is waited for, then killed. Real processes; each moment held by an event or a stopped
process, never by a sleep."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from subagents.tools import detached
from subagents.tools.builtin import builtin_tools
from subagents.tools.process import Process
from subagents.tools.processes import ProcessGroups
from subagents.tools.run_starts import RunEnding

from .conftest import WAIT, make_context, wait_until
from .test_bash_detached import _stopped_children


class HeldAtKill(ProcessGroups):
    """Its first kill (``kill_run``'s, of the run's first process) waits for ``go``: the
    moment between the end's listing of the run's processes and its end."""

    def __init__(self, scratch_root: Path) -> None:
        super().__init__(scratch_root=scratch_root)
        self.killing = threading.Event()
        self.go = threading.Event()

    def kill(self, process: Process, reason: str) -> None:
        if not self.killing.is_set():
            self.killing.set()
            self.go.wait(WAIT)
        super().kill(process, reason)


def _ended(process: Process) -> bool:
    return process.poll() is not None


def test_a_shell_started_while_its_run_ends_is_refused_and_nothing_is_left(
    tmp_path: Path,
) -> None:
    groups = HeldAtKill(tmp_path)
    started: list[Process] = []
    try:
        first = groups.start("sleep 300", cwd=tmp_path, run_id="r1", background=True)
        ender = threading.Thread(target=groups.kill_run, args=("r1",), daemon=True)
        ender.start()
        assert groups.killing.wait(WAIT), "kill_run never killed the run's shell"
        with pytest.raises(RunEnding, match="run r1 is ending"):
            started.append(groups.start("sleep 300", cwd=tmp_path, run_id="r1", background=True))
        other = groups.start("exit 4", cwd=tmp_path, run_id="r2")  # another run: as before
        assert other.wait(WAIT) == 4
        groups.go.set()
        ender.join(WAIT)
        assert not ender.is_alive()
        assert _ended(first)
        assert all(_ended(p) for p in started), "a shell of the ended run still runs"
        assert groups.of_run("r1") == [] and groups.shells.get(first.id) is None
        again = groups.start("exit 3", cwd=tmp_path, run_id="r1")  # its next attempt: may
        assert again.wait(WAIT) == 3
    finally:
        groups.go.set()
        groups.kill_all()


@pytest.fixture
def detaching() -> Iterator[None]:
    """Reapers detached (as in a cluster's node host), so a start waits for its launcher."""
    was = detached._ALLOWED[0]
    detached.allow()
    yield
    detached._ALLOWED[0] = was


def test_a_shell_still_starting_when_its_run_ends_is_killed_with_it(
    tmp_path: Path, detaching: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The start is under way (its launcher stopped before it detached: the start waits)
    when the run's end begins: the end waits for it, then kills it; before, it listed the
    run's processes without it, and the shell ran on, its slot held, until the runtime
    closed. The end is known to be under way when another start of the run is refused."""
    once = tmp_path / "stopped-once"
    launcher = tmp_path / "python"
    stop_once = f"if mkdir {once} 2>/dev/null; then kill -STOP $$; fi"
    launcher.write_text(f'#!/bin/sh\n{stop_once}\nexec {sys.executable} "$@"\n')
    launcher.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(launcher))
    groups = ProcessGroups(scratch_root=tmp_path)
    before = set(_stopped_children())
    outcome: dict[str, Process | BaseException] = {}

    def start() -> None:
        try:
            outcome["shell"] = groups.start("sleep 300", cwd=tmp_path, run_id="r1", background=True)
        except BaseException as exc:
            outcome["shell"] = exc

    starter = threading.Thread(target=start, daemon=True)
    ender = threading.Thread(target=groups.kill_run, args=("r1",), daemon=True)
    try:
        starter.start()
        wait_until(lambda: bool(set(_stopped_children()) - before), what="the launcher stopped")
        ender.start()

        def refused() -> bool:
            try:
                probe = groups.start("true", cwd=tmp_path, run_id="r1")
            except RunEnding:
                return True
            probe.wait(WAIT)  # before the end began: a command as any
            return False

        wait_until(refused, what="the run's end under way")
        for pid in set(_stopped_children()) - before:
            if pid > 0:
                os.kill(pid, signal.SIGCONT)
        starter.join(WAIT)
        ender.join(WAIT)
        assert not starter.is_alive() and not ender.is_alive()
        shell = outcome["shell"]
        assert isinstance(shell, Process), shell
        assert _ended(shell), "the shell started as its run ended still runs"
        assert groups.shells.get(shell.id) is None and groups.live_count() == 0
    finally:
        for pid in set(_stopped_children()) - before:
            if pid > 0:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        groups.kill_all()


def test_a_shell_a_stopped_runs_tool_call_starts_after_the_end_is_refused(
    tmp_path: Path,
) -> None:
    """The run's stop (its ``cancel``) comes before its end (``kill_run``), which lists and
    kills; a tool call still going (a slow PreToolUse hook, an approval) reaches its start
    only after the end has returned: refused, not a shell that keeps its process and slot
    until the runtime closes. Another run, and the same run's next attempt (its own
    cancel), start as before."""
    groups = ProcessGroups(scratch_root=tmp_path)
    stopped = threading.Event()
    try:
        stopped.set()  # the run is stopped ...
        groups.kill_run("r1")  # ... and its end has run: nothing of it was listed
        with pytest.raises(RunEnding, match="run r1 was stopped"):
            groups.start("sleep 300", cwd=tmp_path, run_id="r1", background=True, cancel=stopped)
        assert groups.of_run("r1") == [] and groups.live_count() == 0
        again = groups.start("exit 3", cwd=tmp_path, run_id="r1", cancel=threading.Event())
        assert again.wait(WAIT) == 3
    finally:
        groups.kill_all()


def test_a_background_bash_call_of_a_stopped_run_is_refused_after_its_end(tmp_path: Path) -> None:
    """The Bash tool passes its run's stop to the start (``ctx.cancel``): the model's call,
    reaching its start after the run's end, gets an error, and no shell is left."""
    groups = ProcessGroups(scratch_root=tmp_path)
    stopped = threading.Event()
    ctx = make_context(tmp_path, groups, cancel=stopped)
    try:
        stopped.set()
        groups.kill_run(ctx.run_id)
        with pytest.raises(RunEnding, match="was stopped"):
            builtin_tools()["Bash"].run({"command": "sleep 300", "run_in_background": True}, ctx)
        assert groups.live_count() == 0
    finally:
        groups.kill_all()
