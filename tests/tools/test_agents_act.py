"""Scripted LLM agents using the built-in tools on real temp git repos, through the whole
runtime: permissions, approvals, the workspace, and processes that end with their run."""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from ns_pids import NS, pid_in
from subagents.definitions.discovery import BUILTIN_DIR
from subagents.definitions.spec import AgentSpec
from subagents.messages import RunStatus, ToolResultBlock
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime
from subagents.tools.approval import Approval, ApprovalRequest
from subagents.tools.permissions import Permissions

from .conftest import WAIT, git, group_members, wait_until

pytestmark = pytest.mark.usefixtures("no_new_threads")


@pytest.fixture
def no_new_threads() -> Any:
    before = set(threading.enumerate())
    yield
    left = [t for t in threading.enumerate() if t not in before and t.is_alive()]
    assert left == [], f"threads left behind: {[t.name for t in left]}"


def use(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "input": arguments}


def results(model: ScriptedModel, agent: str) -> list[list[ToolResultBlock]]:
    """The tool results each request of ``agent`` carried, in order."""
    out = []
    for request in model.requests:
        if request.agent == agent and request.messages[-1].role == "user":
            blocks = request.messages[-1].content
            found = [b for b in blocks if isinstance(b, ToolResultBlock)]
            if found:
                out.append(found)
    return out


def agent(name: str, **fields: Any) -> AgentSpec:
    return AgentSpec(name=name, description=f"The {name} agent.", prompt="You act.", **fields)


def test_the_code_agent_greps_reads_edits_and_runs_the_tests(repo: Path) -> None:
    calc = repo / "src" / "calc.py"
    model = ScriptedModel(
        {
            "code": [
                {
                    "tool_calls": [
                        use("Grep", pattern="def add", output_mode="content"),
                        use("Glob", pattern="**/test_*.py"),
                        use("Read", file_path=str(calc)),
                    ]
                },
                {
                    "tool_calls": [
                        use("Edit", file_path=str(calc), old_string="a - b", new_string="a + b")
                    ]
                },
                {"tool_calls": [use("Bash", command="python3 -m pytest -q test_calc.py")]},
                {"text": "fixed: {result0}"},
            ]
        }
    )
    permissions = Permissions(mode="acceptEdits", allow=("Bash(python3 -m pytest:*)",))
    with Runtime(
        agent_dirs=[BUILTIN_DIR], model=model, workspace=repo, permissions=permissions
    ) as rt:
        outcome = rt.run("code", "make add() add", wait=WAIT)
    assert outcome.status is RunStatus.COMPLETED, outcome
    first, edited, tested = results(model, "code")
    assert [r.is_error for r in first] == [False, False, False]
    assert first[0].content == f"{calc}:1:def add(a, b):"
    assert first[1].content == str(repo / "test_calc.py")
    assert first[2].content.startswith("     1\tdef add(a, b):")
    assert "has been updated" in edited[0].content
    assert not tested[0].is_error and "2 passed" in tested[0].content
    assert outcome.result is not None and "2 passed" in outcome.result
    assert "+    return a + b" in git(repo, "diff")


def test_plan_is_refused_an_edit(repo: Path) -> None:
    calc = repo / "src" / "calc.py"
    edit = use("Edit", file_path=str(calc), old_string="a - b", new_string="a + b")
    model = ScriptedModel(
        {
            "plan": [{"tool_calls": [use("Read", file_path=str(calc)), edit]}, "ok"],
            "planner": [{"tool_calls": [use("Read", file_path=str(calc)), edit]}, "ok"],
        }
    )
    agents = [agent("planner", permission_mode="plan")]
    with Runtime(
        agents, agent_dirs=[BUILTIN_DIR], model=model, workspace=repo, permissions="acceptEdits"
    ) as rt:
        assert rt.run("plan", "plan it", wait=WAIT).status is RunStatus.COMPLETED
        assert rt.run("planner", "plan it", wait=WAIT).status is RunStatus.COMPLETED
    ((read, refused),) = results(model, "plan")
    assert not read.is_error
    assert refused.is_error and refused.content == "tool 'Edit' is not available to plan"
    ((read, refused),) = results(model, "planner")  # offered Edit, but in plan mode
    assert refused.is_error
    assert refused.content.startswith("Permission to use Edit was denied: plan mode is read-only")
    assert "a - b" in calc.read_text()


def test_an_agent_with_tools_read_cannot_bash(repo: Path) -> None:
    model = ScriptedModel({"reader": [{"tool_calls": [use("Bash", command="touch x")]}, "ok"]})
    with Runtime([agent("reader", tools=("Read",))], model=model, workspace=repo) as rt:
        rt.run("reader", "go", wait=WAIT)
    ((refused,),) = results(model, "reader")
    assert refused.is_error and refused.content == "tool 'Bash' is not available to reader"
    assert [t.name for t in model.requests[0].tools] == ["Read"]
    assert not (repo / "x").exists()


def test_paths_outside_the_workspace_are_refused(repo: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("s3cret\n")
    (repo / "link").symlink_to(tmp_path)
    calls = [
        use("Read", file_path=str(repo / ".." / "secret.txt")),
        use("Read", file_path=str(secret)),
        use("Read", file_path=str(repo / "link" / "secret.txt")),
        use("Read", file_path="../secret.txt"),
        use("Grep", pattern="s3cret", path=str(repo / "link")),
        use("Write", file_path=str(repo / "link" / "new.txt"), content="x"),
    ]
    model = ScriptedModel({"nosy": [{"tool_calls": calls}, "ok"]})
    with Runtime(
        [agent("nosy")], model=model, workspace=repo, permissions="bypassPermissions"
    ) as rt:
        rt.run("nosy", "go", wait=WAIT)
    (answers,) = results(model, "nosy")
    assert all(a.is_error for a in answers), answers
    for answer in answers:
        assert f"is outside the workspace {repo}" in answer.content
        assert "s3cret" not in answer.content
    assert not (tmp_path / "new.txt").exists()


def test_asks_go_to_the_approval_handler_or_are_denied(repo: Path) -> None:
    asked: list[ApprovalRequest] = []

    def approve(request: ApprovalRequest) -> bool | Approval:
        asked.append(request)
        if "ok" in request.input["command"]:
            return True
        return Approval(False, "not on a Friday")

    script = {
        "worker": [
            {"tool_calls": [use("Bash", command="touch ok.txt"), use("Bash", command="touch no")]},
            "ok",
        ]
    }
    model = ScriptedModel(script)
    with Runtime([agent("worker")], model=model, workspace=repo, approve=approve) as rt:
        rt.run("worker", "go", wait=WAIT)
    ((allowed, denied),) = results(model, "worker")
    assert not allowed.is_error and (repo / "ok.txt").exists()
    assert denied.is_error and denied.content.endswith("not on a Friday")
    assert not (repo / "no").exists()
    assert [r.input["command"] for r in asked] == ["touch ok.txt", "touch no"]
    assert asked[0].agent == "worker" and asked[0].workspace == str(repo)
    # without a handler, the ask is a denial the model can read
    model = ScriptedModel(script)
    with Runtime([agent("worker")], model=model, workspace=repo) as rt:
        rt.run("worker", "go", wait=WAIT)
    ((first, _),) = results(model, "worker")
    assert first.is_error and "no approval handler" in first.content


def test_what_a_turn_reported_goes_before_its_approval_waits(repo: Path) -> None:
    """A turn spawns a worker, then calls Bash, which asks a person: the worker starts while
    the person thinks (the turn's earlier reports are not held back by the approval)."""
    started = threading.Event()

    def approve(request: ApprovalRequest) -> bool:
        # a person takes their time; the worker spawned earlier in this turn runs meanwhile
        return started.wait(WAIT)

    model = ScriptedModel(
        {
            "lead": [
                {
                    "tool_calls": [
                        use("spawn_subagent", agent="worker", task="t", background=True),
                        use("Bash", command="touch ok.txt"),
                    ]
                },
                "done",
            ],
            "worker": ["w done"],
        }
    )
    with Runtime(
        [agent("lead"), agent("worker")], model=model, workspace=repo, approve=approve
    ) as rt:
        rt.subscribe(lambda e: started.set() if (e.kind, e.agent) == ("started", "worker") else 0)
        outcome = rt.run("lead", "go", wait=WAIT * 2)
    assert outcome.status is RunStatus.COMPLETED, outcome
    ((_spawned, bash),) = results(model, "lead")
    assert not bash.is_error, bash.content  # approved: the worker had started meanwhile
    assert (repo / "ok.txt").exists()


def _written(pidfile: Path) -> bool:
    return pidfile.exists() and pidfile.read_text().strip() != ""


def _started(pidfile: Path) -> int:
    wait_until(lambda: _written(pidfile), what="started")
    pgid = pid_in(pidfile)
    wait_until(lambda: len(group_members(pgid)) == 3, what="the group's three processes")
    return pgid


def _spawner(pidfile: Path) -> str:
    return f"echo $$ {NS} > {pidfile}; sleep 60 & sleep 60; wait"


def test_stopping_a_run_kills_its_bash_process_group(repo: Path) -> None:
    pidfile = repo / "pid"
    model = ScriptedModel({"worker": [{"tool_calls": [use("Bash", command=_spawner(pidfile))]}]})
    with Runtime(
        [agent("worker")], model=model, workspace=repo, permissions="bypassPermissions"
    ) as rt:
        handle = rt.spawn("worker", "go")
        pgid = _started(pidfile)
        handle.stop()
        assert handle.result(WAIT).status is RunStatus.CANCELLED
        wait_until(lambda: group_members(pgid) == [], what="the group killed")


def test_a_run_past_its_deadline_kills_its_bash_process_group(repo: Path) -> None:
    pidfile = repo / "pid"
    model = ScriptedModel({"worker": [{"tool_calls": [use("Bash", command=_spawner(pidfile))]}]})
    with Runtime(
        [agent("worker")], model=model, workspace=repo, permissions="bypassPermissions"
    ) as rt:
        handle = rt.spawn("worker", "go", timeout=2.0)
        # only the pid is awaited: the deadline may pass before the whole group is up (on a
        # loaded machine, before the shell has even written its pid)
        wait_until(lambda: _written(pidfile) or handle.done, what="the pid or the end")
        result = handle.result(WAIT)
        # a failure says what the Bash call returned, and whether its shell ever ran (session
        # 30's CI red: COMPLETED after 2 steps, the call's end unknown)
        said = [(b.content, b.is_error) for found in results(model, "worker") for b in found]
        assert result.status is RunStatus.TIMED_OUT, (result, said, _written(pidfile))
        if _written(pidfile):
            pgid = pid_in(pidfile)
            wait_until(lambda: group_members(pgid) == [], what="the group killed")


def test_background_shells_end_with_their_run_and_the_runtime(repo: Path) -> None:
    first, second = repo / "pid1", repo / "pid2"
    model = ScriptedModel(
        {
            "quick": [
                {"tool_calls": [use("Bash", command=_spawner(first), run_in_background=True)]},
                # waits (in the shell) until the background shell has written its pid
                {"tool_calls": [use("Bash", command=f"until [ -s {first} ]; do sleep 0.01; done")]},
                "done",
            ],
            "slow": [{"tool_calls": [use("Bash", command=_spawner(second))]}],
        }
    )
    rt = Runtime(
        [agent("quick"), agent("slow")], model=model, workspace=repo,
        permissions="bypassPermissions",
    )  # fmt: skip
    try:
        assert rt.run("quick", "go", wait=WAIT).status is RunStatus.COMPLETED
        ended = pid_in(first)
        wait_until(lambda: group_members(ended) == [], what="the finished run's shell killed")
        rt.spawn("slow", "go")
        running = _started(second)
    finally:
        rt.close()
    # closing the runtime ended the foreground command (SIGKILL lands after killpg returns)
    wait_until(lambda: group_members(running) == [], what="the foreground group killed")
    assert rt.processes.live_count() == 0


def test_an_agent_with_file_tools_is_told_its_working_directory(repo: Path) -> None:
    model = ScriptedModel({})
    with Runtime(
        [agent("coder"), agent("talker", tools=("send_message",))], model=model, workspace=repo
    ) as rt:
        rt.run("coder", "go", wait=WAIT)
        rt.run("talker", "go", wait=WAIT)
    coder, talker = model.requests
    assert coder.system == (
        f"You act.\n\n<env>\nWorking directory: {repo}\nIs directory a git repo: Yes\n"
        f"Platform: {sys.platform}\n</env>"
    )
    assert talker.system == "You act."
