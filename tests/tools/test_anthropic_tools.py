"""The built-in tools on Claude's API (the real anthropic SDK) against the local fake
Messages API: the schemas as sent, the <env> block, and what the tools answered."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fake_messages_api import FakeMessagesAPI, Recorded, text_message, tool_use_message
from subagents.definitions.discovery import BUILTIN_DIR
from subagents.messages import RunStatus
from subagents.models import AnthropicModel
from subagents.runtime import Runtime

from .conftest import WAIT


def results(req: Recorded) -> list[dict[str, Any]]:
    return [b for b in req.body["messages"][-1]["content"] if b.get("type") == "tool_result"]


def test_explore_greps_and_reads_through_the_sdk(repo: Path) -> None:
    calc = str(repo / "src" / "calc.py")

    def serve(req: Recorded) -> dict[str, Any]:
        got = results(req)
        if not got:
            return tool_use_message(
                [
                    (
                        "toolu_1",
                        "Grep",
                        {"pattern": "def add", "output_mode": "content", "-n": True},
                    ),
                    ("toolu_2", "Read", {"file_path": calc, "limit": 2}),
                ],
            )
        return text_message("add is at " + got[0]["content"])

    with FakeMessagesAPI(handler=serve) as api:
        model = AnthropicModel(api_key="test-key", base_url=api.url)
        try:
            with Runtime(agent_dirs=[BUILTIN_DIR], model=model, workspace=repo) as rt:
                outcome = rt.run("explore", "where is add?", wait=WAIT)
        finally:
            model.close()
        first, second = api.requests
    assert outcome.status is RunStatus.COMPLETED, outcome
    assert outcome.result == f"add is at {calc}:1:def add(a, b):"
    tools = {t["name"]: t for t in first.body["tools"]}
    assert sorted(tools) == ["Glob", "Grep", "LS", "Read"]  # explore's `tools`
    grep = tools["Grep"]["input_schema"]
    assert grep["required"] == ["pattern"]
    assert {"-i", "-n", "-A", "-B", "-C", "output_mode", "head_limit"} <= set(grep["properties"])
    assert grep["properties"]["glob"] == {
        "description": 'Glob pattern to filter files (e.g. "*.js", "*.{ts,tsx}")',
        "type": "string",
    }
    system = "".join(b["text"] for b in first.body["system"])
    assert f"<env>\nWorking directory: {repo}\nIs directory a git repo: Yes" in system
    grep_result, read_result = results(second)
    assert grep_result["tool_use_id"] == "toolu_1"
    assert read_result["content"] == (
        "     1\tdef add(a, b):\n     2\t    return a - b\n\n"
        "(Showing lines 1-2 of 6. Use offset and limit to read other parts.)"
    )
    assert not read_result.get("is_error", False)
