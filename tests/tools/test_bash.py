"""Bash, BashOutput and KillShell: real processes in their own process groups. After a
timeout, a stop, a kill or the end of the run, nothing of the group is left (read from
/proc)."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

import pytest

from ns_pids import NS, pid_in
from subagents.tools.base import ToolError, ToolResult
from subagents.tools.builtin import builtin_tools
from subagents.tools.context import ToolContext
from subagents.tools.processes import HOLDS, ProcessGroups

from .conftest import WAIT, group_members, make_context, wait_until

TOOLS = builtin_tools()


def bash(ctx: ToolContext, **arguments: object) -> ToolResult:
    out = TOOLS["Bash"].run(arguments, ctx)
    assert isinstance(out, ToolResult)
    return out


def _written(pidfile: Path) -> bool:
    return pidfile.exists() and pidfile.read_text().strip() != ""


def spawner(pidfile: Path) -> str:
    """A command whose group has three processes: the shell and two sleeps."""
    return f"echo $$ {NS} > {pidfile}; sleep 60 & sleep 60; wait"


def test_bash_runs_in_the_workspace_and_reports_exit_codes(
    context: ToolContext, repo: Path
) -> None:
    assert bash(context, command="pwd") == ToolResult(str(repo))
    failed = bash(context, command="echo out; echo err >&2; exit 3")
    assert failed.is_error
    assert failed.content == "Exit code 3\nout\nerr"
    assert bash(context, command="true") == ToolResult("(no output)")


def test_the_working_directory_persists_but_never_leaves_the_workspace(
    context: ToolContext, repo: Path
) -> None:
    bash(context, command="cd src")
    assert bash(context, command="pwd").content == str(repo / "src")
    left = bash(context, command="cd /tmp && pwd")
    assert left.content == f"/tmp\nShell cwd was reset to {repo}"
    assert bash(context, command="pwd").content == str(repo)


def test_output_is_capped_with_a_note(context: ToolContext) -> None:
    out = bash(context, command="python3 -c \"print('x' * 100000)\"")
    assert len(out.content) < 31_000
    assert "[output truncated:" in out.content


def test_a_timeout_kills_the_whole_process_group(context: ToolContext, repo: Path) -> None:
    pidfile = repo / "pid"
    result: list[ToolResult] = []
    worker = threading.Thread(
        target=lambda: result.append(bash(context, command=spawner(pidfile), timeout=3000))
    )
    worker.start()
    # the group is up (or, on a machine too loaded to start it in 3 s, the call is over)
    wait_until(lambda: _written(pidfile) or not worker.is_alive(), what="started")
    if _written(pidfile):
        leader = pid_in(pidfile)
        wait_until(lambda: len(group_members(leader)) == 3 or not worker.is_alive(), what="up")
    worker.join(WAIT)
    assert not worker.is_alive()
    (out,) = result
    assert out.is_error
    assert "Command timed out after 3 s" in out.content
    if HOLDS:  # its reaper said all was killed (else the message does not claim it)
        assert "it and every process it started were killed" in out.content, out.content
    # whatever of the group had started is killed (SIGKILL lands after killpg returns)
    if _written(pidfile):
        pgid = pid_in(pidfile)
        wait_until(lambda: group_members(pgid) == [], what="the group killed")


def test_a_stop_kills_the_whole_process_group(repo: Path, processes: ProcessGroups) -> None:
    cancel = threading.Event()
    ctx = make_context(repo, processes, cancel=cancel)
    pidfile = repo / "pid"
    result: list[ToolResult] = []
    worker = threading.Thread(target=lambda: result.append(bash(ctx, command=spawner(pidfile))))
    worker.start()
    wait_until(lambda: pidfile.exists() and pidfile.read_text().strip() != "", what="started")
    pgid = pid_in(pidfile)
    wait_until(lambda: len(group_members(pgid)) == 3, what="the group's three processes")
    cancel.set()
    worker.join(60)
    assert not worker.is_alive()
    assert result[0].is_error and "the run was stopped" in result[0].content
    wait_until(lambda: group_members(pgid) == [], what="the group killed")


def test_background_shell_output_and_kill(context: ToolContext, repo: Path) -> None:
    pidfile = repo / "pid"
    started = bash(context, command=f"echo first; {spawner(pidfile)}", run_in_background=True)
    assert started.content.startswith("Command running in background with ID: bash_")
    shell_id = started.content.rsplit(" ", 1)[1]
    wait_until(lambda: pidfile.exists() and pidfile.read_text().strip() != "", what="started")
    pgid = pid_in(pidfile)
    process = context.processes.get(context.run_id, shell_id)
    assert process is not None  # its output copied by a thread of its own: wait for "first"
    wait_until(lambda: process.output.read_bytes() == b"first\n", what="first relayed")
    seen = TOOLS["BashOutput"].call({"bash_id": shell_id}, context)
    assert seen.startswith("<status>running</status>")
    assert "<stdout>\nfirst\n</stdout>" in seen
    again = TOOLS["BashOutput"].call({"bash_id": shell_id}, context)
    assert "<stdout>\n\n</stdout>" in again  # only what is new
    killed = TOOLS["KillShell"].call({"shell_id": shell_id}, context)
    assert killed == f"Successfully killed shell: {shell_id} (echo first; {spawner(pidfile)})"
    wait_until(lambda: group_members(pgid) == [], what="the group killed")
    with pytest.raises(ToolError, match=f"No shell found with ID: {shell_id}"):
        TOOLS["BashOutput"].call({"bash_id": shell_id}, context)


def test_a_finished_background_shell_reports_its_exit_code(context: ToolContext) -> None:
    started = bash(context, command="echo done; exit 4", run_in_background=True)
    shell_id = started.content.rsplit(" ", 1)[1]
    process = context.processes.get(context.run_id, shell_id)
    assert process is not None
    process.wait(60)
    seen = TOOLS["BashOutput"].call({"bash_id": shell_id, "filter": "^do"}, context)
    assert "<status>completed</status>" in seen and "<exit_code>4</exit_code>" in seen
    assert "<stdout>\ndone\n</stdout>" in seen


def test_the_end_of_a_run_kills_its_background_shells(context: ToolContext, repo: Path) -> None:
    pidfile = repo / "pid"
    bash(context, command=spawner(pidfile), run_in_background=True)
    wait_until(lambda: pidfile.exists() and pidfile.read_text().strip() != "", what="started")
    pgid = pid_in(pidfile)
    assert context.processes.kill_run(context.run_id) == 1
    wait_until(lambda: group_members(pgid) == [], what="the group killed")
    assert context.processes.live_count() == 0


def test_a_hostile_tool_use_id_touches_no_file_outside_the_runs_directory(
    repo: Path, processes: ProcessGroups, tmp_path: Path
) -> None:
    """The file a call's shell writes its last directory to was named after the call's id,
    which comes from the model's answer: an id holding ``/..`` named a file anywhere, and the
    runtime (not the sandbox) deleted it after the call. The command itself can make the
    directory such a path goes through: its run's directory is its ``TMPDIR``."""
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    ctx = make_context(repo, processes)
    run_dir = processes.run_dir(ctx.run_id)
    assert bash(ctx, command='mkdir -p "$TMPDIR/cwd-r-test-"') == ToolResult("(no output)")
    assert (run_dir / "cwd-r-test-").is_dir()  # made by the command, where it may write
    up = "../" * (len(run_dir.resolve().parts) + 1)
    hostile = dataclasses.replace(ctx, tool_use_id="/" + up + str(victim).lstrip("/"))
    assert (run_dir / f"cwd-r-test-{hostile.tool_use_id}").resolve() == victim  # as named
    assert bash(hostile, command="pwd") == ToolResult(str(repo))
    assert victim.read_text() == "keep me"
