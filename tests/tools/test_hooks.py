"""Hooks from a definition's frontmatter: they run only with Runtime(allow_hooks=True); a
PreToolUse exit code 2 blocks the call and its stderr is the model's result."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
import structlog

from subagents.definitions.spec import AgentSpec
from subagents.messages import RunStatus, TextBlock, ToolResultBlock
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime
from subagents.tools.hooks import HookConfigError, Hooks

from .conftest import WAIT


def hooked(hooks: dict[str, Any]) -> AgentSpec:
    return AgentSpec(name="hooked", description="Has hooks.", prompt="Act.", hooks=hooks)


def block_touch(seen: Path) -> dict[str, Any]:
    """A PreToolUse hook on Bash that records its input and blocks commands with 'touch'."""
    script = f"cat > {seen}; if grep -q touch {seen}; then echo 'no touching' >&2; exit 2; fi"
    return {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": script}]}]}


def first_results(model: ScriptedModel) -> list[ToolResultBlock]:
    last = model.requests[1].messages[-1]
    return [b for b in last.content if isinstance(b, ToolResultBlock)]


def script() -> ScriptedModel:
    calls = [
        {"name": "Bash", "input": {"command": "touch made"}},
        {"name": "Bash", "input": {"command": "echo fine"}},
    ]
    return ScriptedModel({"hooked": [{"tool_calls": calls}, "ok"]})


def test_a_pre_tool_use_hook_blocks_only_with_allow_hooks(repo: Path) -> None:
    seen = repo / "seen.json"  # in the workspace: a hook, sandboxed, writes only there
    spec = hooked(block_touch(seen))
    model = script()
    with Runtime(
        [spec], model=model, workspace=repo, permissions="bypassPermissions", allow_hooks=True
    ) as rt:
        assert rt.run("hooked", "go", wait=WAIT).status is RunStatus.COMPLETED
    blocked, passed = first_results(model)
    assert blocked.is_error
    assert blocked.content == "PreToolUse hook blocked this call: no touching"
    assert not (repo / "made").exists()
    assert passed.content == "fine"
    assert '"hook_event_name": "PreToolUse"' in seen.read_text()
    assert '"tool_input": {"command": "echo fine"}' in seen.read_text()
    # the same definition without allow_hooks: the hook never runs
    seen.unlink()
    model = script()
    with Runtime([spec], model=model, workspace=repo, permissions="bypassPermissions") as rt:
        rt.run("hooked", "go", wait=WAIT)
    made, passed = first_results(model)
    assert not made.is_error and (repo / "made").exists()
    assert not seen.exists()


def test_without_allow_hooks_the_runtime_warns_once(repo: Path) -> None:
    spec = hooked(block_touch(repo / "x"))
    with structlog.testing.capture_logs() as logs, Runtime([spec], model=script(), workspace=repo):
        pass
    warnings = [e for e in logs if "allow_hooks=True" in e["event"]]
    assert len(warnings) == 1 and warnings[0]["agents"] == ["hooked"]
    assert warnings[0]["log_level"] == logging.getLevelName(logging.WARNING).lower()


def test_post_tool_use_feedback_and_a_stop_hook_that_asks_for_more(repo: Path) -> None:
    flag = repo / "stopped-once"
    hooks = {
        "PostToolUse": [{"matcher": "*", "hooks": [
            {"type": "command", "command": "echo 'remember to run the tests' >&2; exit 2"}]}],
        "Stop": [{"hooks": [{"type": "command", "command":
            f"if [ -e {flag} ]; then exit 0; fi; touch {flag}; echo 'not done yet' >&2; exit 2"}]}],
    }  # fmt: skip
    model = ScriptedModel(
        {"hooked": [{"tool_calls": [{"name": "LS", "input": {"path": str(repo)}}]}, "one", "two"]}
    )
    with Runtime([hooked(hooks)], model=model, workspace=repo, allow_hooks=True) as rt:
        outcome = rt.run("hooked", "go", wait=WAIT)
    assert outcome.result == "two"  # the Stop hook made it take another turn
    (listed,) = first_results(model)
    assert listed.content.endswith("PostToolUse hook feedback: remember to run the tests")
    last = model.requests[2].messages[-1]
    assert last.content == (TextBlock("Stop hook feedback: not done yet"),)


def test_a_stop_hook_never_buys_a_run_over_its_budget_another_model_call(repo: Path) -> None:
    """The last step is recorded (its budget known) before a Stop hook can keep the run going:
    over budget, the run ends there, with one model call, as after a tool call's step."""
    flag = repo / "stopped-once"
    hooks = {
        "Stop": [{"hooks": [{"type": "command", "command":
            f"if [ -e {flag} ]; then exit 0; fi; touch {flag}; echo 'not done yet' >&2; exit 2"}]}],
    }  # fmt: skip
    usage = {"input_tokens": 90, "output_tokens": 30}
    model = ScriptedModel({"hooked": [{"text": "one", "usage": usage}, "two"]})
    with Runtime([hooked(hooks)], model=model, workspace=repo, allow_hooks=True) as rt:
        outcome = rt.run("hooked", "go", token_budget=100, wait=WAIT)
    assert outcome.status is RunStatus.BUDGET_EXCEEDED, outcome
    assert len(model.requests) == 1


def test_a_json_decision_blocks_too(repo: Path) -> None:
    answer = (
        '{"hookSpecificOutput": {"permissionDecision": "deny", "permissionDecisionReason": "nope"}}'
    )
    hooks = {"PreToolUse": [{"matcher": "Ba.*", "hooks": [{"command": f"echo '{answer}'"}]}]}
    model = script()
    with Runtime(
        [hooked(hooks)],
        model=model,
        workspace=repo,
        permissions="bypassPermissions",
        allow_hooks=True,
    ) as rt:
        rt.run("hooked", "go", wait=WAIT)
    assert [r.content for r in first_results(model)] == [
        "PreToolUse hook blocked this call: nope",
        "PreToolUse hook blocked this call: nope",
    ]


def test_bad_hook_configuration_fails_the_run_naming_the_field(repo: Path) -> None:
    with pytest.raises(HookConfigError, match=r"hooks.PreToolUse\[0\].hooks must be a non-empty"):
        Hooks.parse({"PreToolUse": [{"matcher": "Bash"}]}, "agent 'x'")
    spec = hooked({"PreToolUse": "nope"})
    with Runtime([spec], model=script(), workspace=repo, allow_hooks=True) as rt:
        outcome = rt.run("hooked", "go", wait=WAIT)
    assert outcome.status is RunStatus.FAILED
    assert outcome.error == "agent 'hooked': hooks.PreToolUse must be a list, got 'nope'"
    assert Hooks.parse({"SessionStart": []}, "x").ignored == ("SessionStart",)


def test_hooks_from_a_definition_file(repo: Path, tmp_path: Path) -> None:
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "guarded.md").write_text(
        """---
name: guarded
description: Its Bash calls pass a hook first.
tools: Bash
hooks:
  PreToolUse:
    - matcher: Bash
      hooks:
        - type: command
          command: "echo 'no shell today' >&2; exit 2"
script:
  - tool_calls:
      - name: Bash
        input: {command: "touch made"}
  - text: "{result0}"
---
You are guarded.
""",
        encoding="utf-8",
    )
    with Runtime(
        agent_dirs=[folder], model=ScriptedModel.from_specs, workspace=repo,
        permissions="bypassPermissions", allow_hooks=True,
    ) as rt:  # fmt: skip
        outcome = rt.run("guarded", "go", wait=WAIT)
    assert outcome.result == "PreToolUse hook blocked this call: no shell today"
    assert not (repo / "made").exists()


def test_a_post_tool_use_hook_gets_the_output_as_the_model_is_shown_it(repo: Path) -> None:
    """A tool's output holding a lone surrogate (a bad decode's) is shown to the model and
    kept with U+FFFD in its place; a PostToolUse hook got the raw text, as a JSON escape
    (``\\udc80``) that a strict reader refuses and no other part of the runtime holds. Now it
    gets what the model is shown."""
    seen = repo / "post.json"

    def undecoded() -> str:
        """Says something badly decoded."""
        return "bad \udc80 out"

    hooks = {
        "PostToolUse": [{"matcher": "undecoded", "hooks": [
            {"type": "command", "command": f"cat > {seen}"}]}],
    }  # fmt: skip
    model = ScriptedModel({"hooked": [{"tool_calls": [{"name": "undecoded", "input": {}}]}, "ok"]})
    with Runtime(
        [hooked(hooks)], model=model, workspace=repo, allow_hooks=True, tools=[undecoded]
    ) as rt:
        assert rt.run("hooked", "go", wait=WAIT).status is RunStatus.COMPLETED
    (shown,) = first_results(model)
    assert shown.content == "bad \ufffd out"
    payload = json.loads(seen.read_text(encoding="utf-8"))
    assert payload["hook_event_name"] == "PostToolUse"
    assert payload["tool_response"] == {"content": "bad \ufffd out", "is_error": False}
