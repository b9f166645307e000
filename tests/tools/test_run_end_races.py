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

from marked import kill_marked, marked, new_mark
from subagents.tools import detached, processes
from subagents.tools.builtin import builtin_tools
from subagents.tools.process import Process
from subagents.tools.processes import ProcessGroups
from subagents.tools.run_starts import RunEnding
from subagents.tools.strays import TREE_COOKIE

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


def test_a_shell_still_starting_when_its_run_ends_is_cut_and_the_end_is_prompt(
    tmp_path: Path, detaching: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The start is under way, its launcher stopped for good before it detached (``kill
    -STOP`` by another process of the user, a frozen cgroup), when the run's end begins: the
    end kills the launcher (by its pidfd: ``RunStarts.cut``) and returns, the start ends with
    it, and nothing of the command is left. Before, the end waited for the start, bounded
    only by ``DETACH_WAIT_S`` (here an hour: only the cut can end it), so a node host's stop
    took up to ~70 s. The stopped launcher has cleared its command's mark (``TREE_COOKIE``)
    from its environment: the end's kill by the mark (``strays.kill_strays``) cannot find
    it, only the kill by its pidfd ends it (with the mark, the mark's kill alone passed)."""
    launcher = tmp_path / "python"
    unmarked = f"exec env -u {TREE_COOKIE} /bin/sh -c 'kill -STOP $$; exec {sys.executable} \"$@\"'"
    launcher.write_text(f'#!/bin/sh\n{unmarked} sh "$@"\n')
    launcher.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(launcher))
    monkeypatch.setattr(processes, "DETACH_WAIT_S", 3600.0)
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
    stuck: set[int] = set()
    try:
        starter.start()
        wait_until(lambda: bool(set(_stopped_children()) - before), what="the launcher stopped")
        stuck = set(_stopped_children()) - before
        ender.start()
        ender.join(WAIT)
        assert not ender.is_alive(), "the run's end waited on its stuck launcher"
        starter.join(WAIT)
        assert not starter.is_alive(), "the start went on waiting for its launcher"
        shell = outcome["shell"]
        if isinstance(shell, Process):  # listed before the end listed the run's: killed
            assert _ended(shell), "the shell started as its run ended still runs"
            assert groups.shells.get(shell.id) is None
        assert groups.live_count() == 0 and groups.of_run("r1") == []
        assert not set(_stopped_children()) & stuck, "the stopped launcher is still there"
    finally:
        for pid in stuck:
            if pid > 0 and pid in set(_stopped_children()):  # (on main: our child, unreaped)
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


def test_a_reaper_stuck_before_it_said_its_pid_is_cut_by_the_end(
    tmp_path: Path, detaching: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The launcher detached (its first process ended well), but what it forked stopped
    before it said its pid, holding the status pipe: the start waits for it up to
    ``DETACH_WAIT_S`` (here an hour). The run's end finds it by its command's mark (it is
    not our child: no pidfd was ever taken of it) and kills it, and so returns; the start
    ends with it. Here the launcher is a stand-in that forks such a process and exits 0."""
    mark = new_mark()
    launcher = tmp_path / "python"
    launcher.write_text(f"#!/bin/sh\nsh -c 'kill -STOP $$; sleep {mark}' &\nexit 0\n")
    launcher.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(launcher))
    monkeypatch.setattr(processes, "DETACH_WAIT_S", 3600.0)
    groups = ProcessGroups(scratch_root=tmp_path)
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
        wait_until(lambda: bool(marked(mark)), what="the forked process, stopped")
        ender.start()
        ender.join(WAIT)
        assert not ender.is_alive(), "the run's end waited on a reaper that never said its pid"
        starter.join(WAIT)
        assert not starter.is_alive(), "the start went on waiting for its reaper"
        assert marked(mark) == [], "the stuck process is still there"
        assert groups.live_count() == 0 and groups.of_run("r1") == []
    finally:
        kill_marked(mark)
        groups.kill_all()


def test_a_launcher_stuck_when_the_runtime_closes_is_cut_by_the_close(
    tmp_path: Path, detaching: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node host closes (``kill_all``) while a command's launcher is stopped for good: the
    run's actor thread, inside that start, never gets to its run's end (its ``kill_run``),
    so only the close can cut it. Before, the close left the launcher stopped and the
    start waiting up to ``DETACH_WAIT_S`` (here an hour), a thread of the host busy."""
    launcher = tmp_path / "python"
    unmarked = f"exec env -u {TREE_COOKIE} /bin/sh -c 'kill -STOP $$; exec {sys.executable} \"$@\"'"
    launcher.write_text(f'#!/bin/sh\n{unmarked} sh "$@"\n')
    launcher.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(launcher))
    monkeypatch.setattr(processes, "DETACH_WAIT_S", 3600.0)
    groups = ProcessGroups(scratch_root=tmp_path)
    before = set(_stopped_children())
    outcome: dict[str, Process | BaseException] = {}

    def start() -> None:
        try:
            outcome["shell"] = groups.start("sleep 300", cwd=tmp_path, run_id="r1", background=True)
        except BaseException as exc:
            outcome["shell"] = exc

    starter = threading.Thread(target=start, daemon=True)
    stuck: set[int] = set()
    try:
        starter.start()
        wait_until(lambda: bool(set(_stopped_children()) - before), what="the launcher stopped")
        stuck = set(_stopped_children()) - before
        groups.kill_all()
        starter.join(WAIT)
        assert not starter.is_alive(), "the start went on waiting for its launcher"
        shell = outcome["shell"]
        if isinstance(shell, Process):  # listed after the close: killed by its start
            assert _ended(shell), "the shell started as the runtime closed still runs"
        assert groups.live_count() == 0
        assert not set(_stopped_children()) & stuck, "the stopped launcher is still there"
    finally:
        for pid in stuck:
            if pid > 0 and pid in set(_stopped_children()):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        groups.kill_all()
