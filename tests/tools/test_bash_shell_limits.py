"""A run's background shells, and the runtime's, are bounded (``tools/shell_limits.py``): a
start past a limit is a tool error naming it and how to free a slot, and loses nothing else;
KillShell or a shell's end frees a slot. Real shells under the real reaper."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from marked import hidden_daemon, kill_marked, marked, new_mark, until_ready
from subagents.definitions.spec import AgentSpec
from subagents.messages import RunStatus, ToolResultBlock
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime
from subagents.supervision.limits import LimitError, Limits
from subagents.tools.base import ToolError
from subagents.tools.builtin import builtin_tools
from subagents.tools.context import RunSession, ToolContext
from subagents.tools.processes import ProcessGroups
from subagents.tools.shell_limits import ShellLimits

from .conftest import WAIT, make_context, wait_until
from .test_bash import bash

TOOLS = builtin_tools()


@pytest.fixture
def limited() -> Iterator[ProcessGroups]:
    groups = ProcessGroups(shell_limits=ShellLimits(per_run=2, per_runtime=3))
    yield groups
    groups.kill_all()


@pytest.fixture
def ctx(repo: Path, limited: ProcessGroups) -> ToolContext:
    return make_context(repo, limited)


def background(ctx: ToolContext, command: str = "sleep 300") -> str:
    """A background shell's id; fails the test when it was refused."""
    out = bash(ctx, command=command, run_in_background=True)
    assert not out.is_error, out.content
    return out.content.rsplit(" ", 1)[-1]


def refused(ctx: ToolContext, command: str = "sleep 300") -> str:
    """The tool error a background shell's start got (the test fails if it started)."""
    with pytest.raises(ToolError) as error:
        bash(ctx, command=command, run_in_background=True)
    return str(error.value)


def status(ctx: ToolContext, shell_id: str) -> str:
    return str(TOOLS["BashOutput"].run({"bash_id": shell_id}, ctx))


def other_run(ctx: ToolContext) -> ToolContext:
    return dataclasses.replace(ctx, run_id="r-other", session=RunSession(cwd=ctx.workspace.root))


def test_a_shell_past_the_runs_limit_is_refused_and_killshell_frees_a_slot(
    ctx: ToolContext,
) -> None:
    first, second = background(ctx), background(ctx)
    refusal = refused(ctx, "echo never > never.txt")
    assert "Limits.max_background_shells_per_run" in refusal
    assert f"KillShell ({first}, {second})" in refusal
    assert not (ctx.workspace.root / "never.txt").exists()  # nothing of it ran
    for shell_id in (first, second):  # nothing else lost
        assert "<status>running</status>" in status(ctx, shell_id)
    assert TOOLS["KillShell"].call({"shell_id": first}, ctx).startswith("Successfully killed")
    background(ctx)
    assert "<status>running</status>" in status(ctx, second)


def test_a_shell_that_ended_frees_its_slot_and_its_output_stays_readable(
    ctx: ToolContext,
) -> None:
    done = background(ctx, "echo finished")
    background(ctx)
    started: list[str] = []

    def starts() -> bool:  # its slot is free once its reaper has ended, just after its end
        try:
            started.append(background(ctx))
        except ToolError:
            return False
        return True

    wait_until(starts, what="a slot freed by the ended shell")
    assert len(started) == 1
    shown: list[str] = []

    def completed() -> bool:
        shown.append(status(ctx, done))
        return "<status>completed" in shown[-1]

    wait_until(completed, what="the ended shell read")
    assert "finished" in "".join(shown)


def test_the_runtimes_limit_counts_every_runs_shells(ctx: ToolContext) -> None:
    background(ctx), background(ctx)
    other = other_run(ctx)
    mine = background(other)
    refusal = refused(other)
    assert "Limits.max_background_shells)" in refusal
    assert f"KillShell ({mine})" in refusal
    ctx.processes.kill_run(ctx.run_id)  # a run's end frees its slots
    background(other)


def test_a_shell_whose_daemon_runs_holds_its_slot_until_killshell(
    ctx: ToolContext, repo: Path
) -> None:
    """Its shell ended, but its reaper holds a daemon (what a slot bounds): KillShell kills
    that and frees the slot, even after BashOutput read the shell to its end."""
    mark, ready = new_mark(), repo / "ready"
    try:
        started = f"{hidden_daemon(mark, ready)} {until_ready(ready)} exit 3"
        lingering = background(ctx, started)
        wait_until(lambda: "<exit_code>3</exit_code>" in status(ctx, lingering), what="its end")
        wait_until(lambda: bool(marked(mark, exactly=True)), what="the daemon running on")
        background(ctx)
        refused(ctx)
        killed = TOOLS["KillShell"].call({"shell_id": lingering}, ctx)
        assert "it had ended (exit code 3)" in killed
        assert marked(mark) == []  # killed, and reaped by its reaper before it ended
        background(ctx)
    finally:
        kill_marked(mark)


def test_killshell_of_a_shell_with_nothing_left_says_it_is_not_running(
    ctx: ToolContext,
) -> None:
    done = background(ctx, "true")
    process = ctx.processes.get(ctx.run_id, done)
    assert process is not None
    wait_until(lambda: process.poll() is not None, what="its reaper's end")
    with pytest.raises(ToolError, match="is not running, so cannot be killed"):
        TOOLS["KillShell"].call({"shell_id": done}, ctx)


@pytest.mark.parametrize(
    ("per_run", "per_runtime", "held", "total", "names"),
    [
        (2, 5, ["bash_1", "bash_2"], 2, "max_background_shells_per_run"),
        (4, 3, ["bash_1"], 3, "max_background_shells)"),
        (4, 3, [], 3, "wait for another run's to end"),
    ],
)
def test_the_refusal_names_the_limit_reached(
    per_run: int, per_runtime: int, held: list[str], total: int, names: str
) -> None:
    refusal = ShellLimits(per_run, per_runtime).refusal(held, total)
    assert refusal is not None and names in refusal


def test_below_both_limits_a_shell_may_start() -> None:
    assert ShellLimits(2, 3).refusal(["bash_1"], 2) is None


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "4"])
def test_a_limit_must_be_a_positive_integer(bad: object) -> None:
    with pytest.raises(ValueError, match="per_run must be a positive integer"):
        ShellLimits(per_run=bad)  # type: ignore[arg-type]
    with pytest.raises(LimitError, match="max_background_shells must be a positive integer"):
        Limits(max_background_shells=bad)  # type: ignore[arg-type]


def test_the_runtimes_limits_bound_a_runs_shells(repo: Path) -> None:
    """``Limits.max_background_shells_per_run`` reaches the runtime's process groups: the
    model's second shell is refused as a tool error, and its run goes on to complete."""
    start = {"name": "Bash", "input": {"command": "sleep 300", "run_in_background": True}}
    model = ScriptedModel({"shells": [{"tool_calls": [start, start]}, "done"]})
    spec = AgentSpec(name="shells", description="Starts shells.", prompt="Act.")
    with Runtime(
        [spec], model=model, workspace=repo, permissions="bypassPermissions",
        limits={"max_background_shells_per_run": 1},
    ) as rt:  # fmt: skip
        assert rt.run("shells", "go", wait=WAIT).status is RunStatus.COMPLETED
    last = model.requests[1].messages[-1]
    results = sorted(
        (b for b in last.content if isinstance(b, ToolResultBlock)), key=lambda b: b.is_error
    )
    assert [b.is_error for b in results] == [False, True]
    assert "Command running in background with ID: bash_" in str(results[0].content)
    assert "Limits.max_background_shells_per_run" in str(results[1].content)


def test_a_runs_limit_above_the_runtimes_is_refused_naming_both() -> None:
    with pytest.raises(LimitError, match=r"max_background_shells_per_run \(80\) is above"):
        Limits(max_background_shells_per_run=80)
    assert Limits(max_background_shells_per_run=80, max_background_shells=80)


def test_the_runtimes_limit_alone_lowers_a_runs_default() -> None:
    """Lowering the runtime's limit below the per-run default (16) is not refused: a run
    then gets at most the runtime's, and a per-run limit given is kept."""
    assert Limits(max_background_shells=8).background_shells_per_run() == 8
    assert Limits().background_shells_per_run() == 16
    assert Limits(max_background_shells_per_run=3).background_shells_per_run() == 3
    with pytest.raises(LimitError, match="max_background_shells_per_run must be a positive"):
        Limits(max_background_shells_per_run=0)
