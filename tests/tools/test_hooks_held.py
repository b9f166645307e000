"""A hook's command runs under the reaper, as a Bash command does (``tools/held.py``): its
daemons, however they hide (a new session, an empty environment), end at its end and at its
timeout, and its stdin, stdout and stderr pass through untouched. Real hooks, real
processes; what still runs is read from /proc (``marked``: by a mark, not a pid)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from marked import (
    hidden_daemon,
    host_leaves_nothing,
    kill_marked,
    marked,
    new_mark,
    until_ready,
)
from subagents.tools import detached
from subagents.tools.hooks import Hooks, run_hooks
from subagents.tools.sandbox import RunSandbox, Sandbox

from .conftest import WAIT
from .test_sandbox import landlock

LOG = structlog.get_logger("test")


def hooks_of(command: str, timeout: float = 60.0) -> Hooks:
    entry = {"matcher": "*", "hooks": [{"type": "command", "command": command, "timeout": timeout}]}
    return Hooks.parse({"PreToolUse": [entry]}, "test")


@pytest.fixture(autouse=True, params=["child", "detached"])
def detaching(request: pytest.FixtureRequest) -> Iterator[None]:
    """``detached``: as in a cluster's node host, the hook's reaper not the runtime's child
    (``tools/detached.py``), reached by its pidfd, its shell's exit code as it says it."""
    was = detached._ALLOWED[0]
    detached._ALLOWED[0] = request.param == "detached"
    yield
    detached._ALLOWED[0] = was


@pytest.fixture(params=["unsandboxed", pytest.param("sandboxed", marks=landlock)])
def sandbox(request: pytest.FixtureRequest, repo: Path) -> RunSandbox | None:
    if request.param == "unsandboxed":
        return None
    return Sandbox.coerce(Sandbox()).for_run(workspace=repo, read_only=False, network=True)


def test_a_hooks_daemon_ends_with_the_hook_and_its_answer_passes_through(
    repo: Path, sandbox: RunSandbox | None
) -> None:
    mark, ready = new_mark(), repo / "ready"
    answer = '{"decision": "block", "reason": "held hook said so"}'
    started = f"{hidden_daemon(mark, ready)} {until_ready(ready)}"
    command = f"cat > {repo / 'seen'}; {started} echo '{answer}'"
    try:
        outcome = run_hooks(
            hooks_of(command), "PreToolUse", {"tool_name": "Bash"}, tool="Bash", cwd=repo,
            cancel=threading.Event(), log=LOG, sandbox=sandbox, temp_dir=repo,
        )  # fmt: skip
        assert outcome.blocked and outcome.reason == "held hook said so"  # stdout through
        assert '"tool_name": "Bash"' in (repo / "seen").read_text()  # stdin through
        assert ready.read_text().strip() == "ready"  # the daemon started
        assert marked(mark) == []  # killed and reaped by the reaper before it ended
    finally:
        kill_marked(mark)


def test_a_hooks_timeout_ends_the_daemons_it_started(
    repo: Path, sandbox: RunSandbox | None
) -> None:
    """The timeout must fall after the daemon started, or the test proves nothing: on a
    machine too loaded to start it within the first, it is tried with a longer one."""
    mark, ready = new_mark(), repo / "ready"
    command = f"{hidden_daemon(mark, ready)} {until_ready(ready)} sleep 300"
    try:
        for timeout in (2.0, 15.0, 60.0):
            outcome = run_hooks(
                hooks_of(command, timeout), "PreToolUse", {}, tool="Bash", cwd=repo,
                cancel=threading.Event(), log=LOG, sandbox=sandbox, temp_dir=repo,
            )  # fmt: skip
            assert not outcome.blocked
            if ready.exists() and ready.read_text().strip():
                break
        else:
            pytest.fail("the hook's daemon never started, even within a 60 s timeout")
        assert marked(mark) == []  # killed and reaped by the reaper before it ended
    finally:
        kill_marked(mark)


def test_a_hook_still_reads_its_exit_code_and_stderr(repo: Path) -> None:
    outcome = run_hooks(
        Hooks.parse({"PreToolUse": [{"hooks": [{"command": "echo 'not here' >&2; exit 2"}]}]}, "t"),
        "PreToolUse", {}, tool="Read", cwd=repo, cancel=threading.Event(), log=LOG,
    )  # fmt: skip
    assert outcome.blocked and outcome.reason == "not here"


def test_a_hook_slow_to_read_gets_all_of_a_large_body(
    repo: Path, sandbox: RunSandbox | None
) -> None:
    """A body larger than the pipe (64 KiB: a Write's content), read only after the first
    poll (a slow start: the reaper's interpreter, a loaded machine), reaches the hook whole
    and its stdin is closed, so its answer counts. With ``communicate(input=...)`` retried
    after its poll's timeout, the rest was never sent: the hook waited until its timeout,
    and its block was lost (not blocked)."""
    content = "x" * 300_000
    command = 'sleep 0.5; n=$(wc -c); echo "read $n bytes" >&2; exit 2'
    outcome = run_hooks(
        hooks_of(command, timeout=30.0), "PreToolUse", {"tool_input": {"content": content}},
        tool="Write", cwd=repo, cancel=threading.Event(), log=LOG, sandbox=sandbox,
        temp_dir=repo,
    )  # fmt: skip
    assert outcome.blocked, outcome
    read = int(outcome.reason.split()[1])
    assert read > len(content)  # all of it: the JSON around the content too


NODE_HOST = """
import sys, threading
from pathlib import Path
import structlog
from subagents.tools.detached import allow
from subagents.tools.hooks import Hooks, run_hooks
from subagents.tools.sandbox import Sandbox
allow()  # as a cluster's node host does (Ray kills its children)
where, command = Path(sys.argv[1]), sys.argv[2]
sandbox = None
if sys.argv[3] == "sandboxed":
    sandbox = Sandbox.coerce(Sandbox()).for_run(workspace=where, read_only=False, network=True)
entry = {"matcher": "*", "hooks": [{"type": "command", "command": command, "timeout": 600}]}
run_hooks(
    Hooks.parse({"PreToolUse": [entry]}, "t"), "PreToolUse", {}, tool="Bash", cwd=where,
    cancel=threading.Event(), log=structlog.get_logger("t"), sandbox=sandbox, temp_dir=where,
)
"""


@pytest.mark.timeout(400)  # (a hang guard: its waits' guards, each WAIT, say what failed)
@pytest.mark.parametrize("kind", ["unsandboxed", pytest.param("sandboxed", marks=landlock)])
def test_a_hooks_daemon_ends_when_a_node_host_is_lost(repo: Path, kind: str) -> None:
    """Ray, ending a lost driver's node host, SIGKILLs the host's children, then the host.
    A hook's launcher was one of them: its shell went with it (``PR_SET_PDEATHSIG``), and
    its hidden daemon lived on under init. Now it is detached there (not the host's child,
    as Bash's): the host's death, its lifeline, ends the hook and its daemon."""
    mark, ready = new_mark(), repo / "ready"
    command = f"{hidden_daemon(mark, ready)} {until_ready(ready)} sleep 300"
    argv = [sys.executable, "-c", NODE_HOST, str(repo), command, kind]
    host_leaves_nothing(argv, mark, WAIT, lost=True)
