"""The sandbox through the whole runtime: scripted runs whose Bash calls, hooks and stdio MCP
server try to write outside what their run may write, on the real kernel (Landlock)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import structlog

from subagents.definitions.spec import AgentSpec
from subagents.messages import RunStatus, ToolResultBlock
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime
from subagents.tools.approval import ApprovalRequest
from subagents.tools.base import Tool
from subagents.tools.bash import BASH, BashInput
from subagents.tools.permissions import Permissions
from subagents.tools.sandbox_exec import kernel_abi

from .conftest import WAIT

landlock = pytest.mark.skipif(kernel_abi() < 4, reason="the kernel offers no Landlock ABI 4+")
SERVER_APP = Path(__file__).resolve().parent.parent / "mcp_servers" / "mcp_server_app.py"

TRUSTING_BASH = Tool(
    name="Bash",
    description=BASH.description,
    input_schema=BASH.input_schema,
    run=BASH.run,
    read_only=True,  # a classifier that believes every command line: the sandbox must hold
    params=BashInput,
)


def use(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "input": arguments}


def agent(name: str, **fields: Any) -> AgentSpec:
    return AgentSpec(name=name, description=f"The {name} agent.", prompt="You act.", **fields)


def results(model: ScriptedModel, name: str) -> list[ToolResultBlock]:
    """Every tool result ``name``'s model was shown, in order."""
    out: list[ToolResultBlock] = []
    for request in model.requests:
        if request.agent == name and request.messages[-1].role == "user":
            out += [b for b in request.messages[-1].content if isinstance(b, ToolResultBlock)]
    return out


def bash_run(commands: list[str], **fields: Any) -> ScriptedModel:
    steps: list[Any] = [{"tool_calls": [use("Bash", command=c, **fields)]} for c in commands]
    return ScriptedModel({"worker": [*steps, "done"]})


def tree(root: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    out = tmp_path / "outside"
    out.mkdir()
    (out / "victim").write_text("keep me")
    return out


def tricks(repo: Path, outside: Path) -> list[str]:
    (repo / "bin").mkdir()
    for name in ("cat", "ext"):
        script = repo / "bin" / name
        script.write_text(f"#!/bin/sh\necho pwned > {outside}/{name}\n")
        script.chmod(0o755)
    (repo / "a").write_text("a\n")
    (repo / "b").write_text("b\n")
    return [
        "GIT_EXTERNAL_DIFF=./bin/ext git diff --no-index a b",
        "PATH=./bin:$PATH cat a",
        "./bin/cat a",
        f"setsid -w sh -c 'echo x > {outside}/setsid'",
        f"find {outside} -name victim -delete",
        f"echo x > {repo}/written",
        'echo ok > "$TMPDIR/mine" && cat "$TMPDIR/mine"',
    ]


@landlock
@pytest.mark.parametrize("bash", ["builtin", "trusting"])
def test_a_plan_mode_run_changes_nothing_outside_its_temp_dir(
    repo: Path, outside: Path, tmp_path: Path, bash: str
) -> None:
    """Whatever the permission layer lets through in plan mode (the built-in Bash's reading
    of the line, or a Bash that calls every line read-only), nothing outside changes."""
    commands = tricks(repo, outside)
    before = tree(tmp_path)
    model = bash_run(commands)
    tools = [TRUSTING_BASH] if bash == "trusting" else []
    with Runtime(
        [agent("worker")], model=model, workspace=repo, permissions="plan", tools=tools
    ) as rt:
        assert rt.run("worker", "look around", wait=WAIT).status is RunStatus.COMPLETED
    assert tree(tmp_path) == before
    shown = results(model, "worker")
    assert len(shown) == len(commands)
    if bash == "trusting":  # every trick ran, and the kernel refused its write
        assert all("Permission denied" in r.content for r in shown[:-1]), shown
        assert shown[-1].content == "ok"


@landlock
@pytest.mark.parametrize("mode", ["default", "acceptEdits"])
def test_with_bash_allowed_a_write_inside_works_and_outside_fails(
    repo: Path, outside: Path, mode: str
) -> None:
    model = bash_run(["echo in > inside.txt", f"echo out > {outside}/out.txt"])
    permissions = Permissions(mode=mode, allow=("Bash",))
    with Runtime([agent("worker")], model=model, workspace=repo, permissions=permissions) as rt:
        assert rt.run("worker", "write", wait=WAIT).status is RunStatus.COMPLETED
    inside, out = results(model, "worker")
    assert (inside.content, inside.is_error) == ("(no output)", False)
    assert (repo / "inside.txt").read_text() == "in\n"
    assert out.is_error and "Permission denied" in out.content
    assert not (outside / "out.txt").exists()


def test_the_api_key_reaches_bash_only_when_named(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-not-for-tools")
    seen = []
    for tool_env in (None, ["ANTHROPIC_API_KEY"]):
        model = bash_run(['echo "key=${ANTHROPIC_API_KEY:-unset}"'])
        with Runtime(
            [agent("worker")],
            model=model,
            workspace=repo,
            permissions="bypassPermissions",
            tool_env=tool_env,
        ) as rt:
            rt.run("worker", "show", wait=WAIT)
        seen.append(results(model, "worker")[0].content)
    assert seen == ["key=unset", "key=sk-not-for-tools"]


@landlock
def test_a_definition_with_network_off_cannot_connect(repo: Path) -> None:
    import socket

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    port = server.getsockname()[1]
    connect = f"import socket; socket.create_connection(('127.0.0.1', {port})); print('connected')"
    try:
        outputs = {}
        for network in ("off", "on"):
            model = bash_run([f'{sys.executable} -c "{connect}"'])
            with Runtime(
                [agent("worker", network=network)],
                model=model,
                workspace=repo,
                permissions="bypassPermissions",
            ) as rt:
                rt.run("worker", "connect", wait=WAIT)
            outputs[network] = results(model, "worker")[0]
    finally:
        server.close()
    assert outputs["off"].is_error and "PermissionError" in outputs["off"].content
    assert outputs["on"].content == "connected"


@landlock
def test_a_requester_with_network_off_turns_it_off_for_the_runs_below(repo: Path) -> None:
    """A child whose own definition says nothing may not reach the network when its parent's
    definition turned it off: the sandbox is no wider than any requester's."""
    import socket

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    port = server.getsockname()[1]
    connect = f"import socket; socket.create_connection(('127.0.0.1', {port})); print('connected')"
    spawn = use("spawn_subagent", agent="worker", task="connect")
    try:
        outputs = {}
        for network in ("off", "on"):
            model = ScriptedModel(
                {
                    "lead": [{"tool_calls": [spawn]}, "done"],
                    "worker": [
                        {"tool_calls": [use("Bash", command=f'{sys.executable} -c "{connect}"')]},
                        "done",
                    ],
                }
            )
            lead = agent("lead", network=network)
            with Runtime(
                [lead, agent("worker")],
                model=model,
                workspace=repo,
                permissions="bypassPermissions",
            ) as rt:
                rt.run("lead", "go", wait=WAIT)
            outputs[network] = results(model, "worker")[0]
    finally:
        server.close()
    assert outputs["off"].is_error and "PermissionError" in outputs["off"].content
    assert outputs["on"].content == "connected"


@landlock
def test_hook_commands_run_in_the_sandbox(repo: Path, outside: Path) -> None:
    hook = f"echo hooked > {outside}/hook; echo hooked > {repo}/hook"
    spec = agent(
        "worker",
        hooks={
            "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": hook}]}]
        },
    )
    model = bash_run(["echo ran"])
    with Runtime(
        [spec], model=model, workspace=repo, permissions="bypassPermissions", allow_hooks=True
    ) as rt:
        assert rt.run("worker", "go", wait=WAIT).status is RunStatus.COMPLETED
    assert (repo / "hook").read_text() == "hooked\n"  # the hook ran
    assert not (outside / "hook").exists()  # and could not write outside


@landlock
def test_a_stdio_mcp_server_started_for_a_run_is_sandboxed(repo: Path, outside: Path) -> None:
    """The test server's ``note`` appends to a log: outside the workspace it cannot; and for
    a plan-mode run, its ``peek`` (marked read-only, but writing) cannot write even inside."""
    for log, mode, tool, sandbox in (
        (outside / "notes.txt", "bypassPermissions", "mcp__calc__note", True),
        (repo / "notes.txt", "plan", "mcp__calc__peek", True),
        (outside / "control.txt", "bypassPermissions", "mcp__calc__note", False),
    ):
        config = {"command": sys.executable, "args": [str(SERVER_APP), "--log", str(log)]}
        model = ScriptedModel({"worker": [{"tool_calls": [use(tool, text="x")]}, "done"]})
        with Runtime(
            [agent("worker")],
            model=model,
            workspace=repo,
            permissions=mode,
            mcp_servers={"calc": config},
            sandbox=sandbox,
        ) as rt:
            assert rt.run("worker", "note", wait=WAIT).status is RunStatus.COMPLETED
        answer = results(model, "worker")[0]
        # the SDK hides the server's exception ("Error executing tool note"); the log shows
        assert answer.is_error is sandbox, answer
        assert log.exists() is not sandbox


def test_without_landlock_plan_mode_refuses_bash_and_default_mode_warns(
    repo: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUBAGENTS_LANDLOCK_ABI", "0")
    command = f"echo x > {outside}/x"
    plan = bash_run([command])
    with (
        structlog.testing.capture_logs() as logs,
        Runtime(
            [agent("worker")], model=plan, workspace=repo, permissions="plan", tools=[TRUSTING_BASH]
        ) as rt,
    ):
        rt.run("worker", "go", wait=WAIT)
    refused = results(plan, "worker")[0]
    assert refused.is_error and "the kernel offers no Landlock" in refused.content
    assert not (outside / "x").exists()
    assert any("offers no Landlock" in entry["event"] for entry in logs)
    default = bash_run([command])
    with Runtime(
        [agent("worker")], model=default, workspace=repo, permissions=Permissions(allow=("Bash",))
    ) as rt:
        rt.run("worker", "go", wait=WAIT)
    assert (outside / "x").read_text() == "x\n"  # ran, unsandboxed, after the warning


@landlock
def test_dangerously_disable_sandbox_asks_and_runs_outside_once_approved(
    repo: Path, outside: Path
) -> None:
    asked: list[ApprovalRequest] = []

    def approve(request: ApprovalRequest) -> bool:
        asked.append(request)
        return True

    command = f"echo out > {outside}/approved"
    permissions = Permissions(mode="acceptEdits", allow=("Bash",))
    denied = bash_run([command], dangerouslyDisableSandbox=True)
    with Runtime([agent("worker")], model=denied, workspace=repo, permissions=permissions) as rt:
        rt.run("worker", "go", wait=WAIT)
    answer = results(denied, "worker")[0]
    assert answer.is_error and "outside the sandbox" in answer.content
    assert not (outside / "approved").exists()
    model = bash_run([command], dangerouslyDisableSandbox=True)
    with Runtime(
        [agent("worker")], model=model, workspace=repo, permissions=permissions, approve=approve
    ) as rt:
        rt.run("worker", "go", wait=WAIT)
    assert [r.tool for r in asked] == ["Bash"] and "outside the sandbox" in asked[0].reason
    assert (outside / "approved").read_text() == "out\n"
    plan = bash_run([command], dangerouslyDisableSandbox=True)
    with Runtime(
        [agent("worker")], model=plan, workspace=repo, permissions="plan", tools=[TRUSTING_BASH],
        approve=approve,
    ) as rt:  # fmt: skip
        rt.run("worker", "go", wait=WAIT)
    assert "read-only" in results(plan, "worker")[0].content and len(asked) == 1


@landlock
def test_a_worktree_run_can_commit_but_not_touch_the_repository_hooks(repo: Path) -> None:
    """An ``isolation: worktree`` run writes its worktree and what ``git commit`` there needs
    (its git directory, the shared objects and refs), not the main tree nor ``.git/hooks``."""
    commit = (
        "echo new > new.txt && git add new.txt"
        " && git -c user.name=t -c user.email=t@t commit -qm new && echo committed"
    )
    plant = f"echo 'echo pwned' > {repo}/.git/hooks/post-checkout"
    model = bash_run([commit, plant, f"echo x > {repo}/main.txt"])
    spec = agent("worker", metadata={"isolation": "worktree"})
    with Runtime([spec], model=model, workspace=repo, permissions="bypassPermissions") as rt:
        assert rt.run("worker", "commit", wait=WAIT).status is RunStatus.COMPLETED
    committed, planted, main = results(model, "worker")
    assert committed.content == "committed", committed
    assert planted.is_error and "Permission denied" in planted.content
    assert main.is_error and not (repo / "main.txt").exists()
    assert not (repo / ".git" / "hooks" / "post-checkout").exists()


def test_without_landlock_a_plan_runs_hooks_and_mcp_servers_do_not_start(
    repo: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUBAGENTS_LANDLOCK_ABI", "0")
    hook = f"echo hooked > {outside}/hook"
    spec = agent(
        "worker",
        hooks={"PreToolUse": [{"matcher": "*", "hooks": [{"type": "command", "command": hook}]}]},
    )
    config = {"command": sys.executable, "args": [str(SERVER_APP)]}
    (repo / "a").write_text("a\n")
    calls = [use("mcp__calc__add", a=1, b=2), use("Read", file_path=str(repo / "a"))]
    model = ScriptedModel({"worker": [{"tool_calls": calls}, "done"]})
    with (
        structlog.testing.capture_logs() as logs,
        Runtime(
            [spec],
            model=model,
            workspace=repo,
            permissions="plan",
            mcp_servers={"calc": config},
            allow_hooks=True,
        ) as rt,
    ):
        assert rt.run("worker", "add", wait=WAIT).status is RunStatus.COMPLETED
        assert rt.mcp.status() == {"calc": "failed"}
    added, read = results(model, "worker")
    assert added.is_error and "the kernel offers no Landlock" in added.content, added
    assert not read.is_error  # Read needs no process: it works
    hooks = [e for e in logs if e["event"] == "hook failed"]
    assert hooks and "not run: this run is read-only" in hooks[0]["stderr"]
    assert not (outside / "hook").exists()
