"""Agents calling a real stdio MCP server (tests/mcp_servers/mcp_server_app.py, the mcp SDK)
through the whole runtime: the offline model and Claude's backend (the real anthropic SDK
against the local fake Messages API), permissions, failures, and the end of the runtime."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from fake_messages_api import FakeMessagesAPI, Recorded, text_message, tool_use_message
from subagents.definitions.spec import AgentSpec
from subagents.messages import RunStatus, ToolResultBlock
from subagents.models import AnthropicModel, RetryPolicy
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime
from subagents.tools.approval import ApprovalRequest
from subagents.tools.permissions import Permissions

from .conftest import alive, server_config, server_pid

WAIT = 60.0


def use(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "input": arguments}


def agent(name: str, **fields: Any) -> AgentSpec:
    return AgentSpec(name=name, description=f"The {name} agent.", prompt="You act.", **fields)


def answers(model: ScriptedModel, name: str) -> list[list[ToolResultBlock]]:
    out = []
    for request in model.requests:
        if request.agent == name and request.messages[-1].role == "user":
            found = [b for b in request.messages[-1].content if isinstance(b, ToolResultBlock)]
            if found:
                out.append(found)
    return out


@pytest.fixture
def no_new_threads() -> Any:
    before = set(threading.enumerate())
    yield
    left = [t for t in threading.enumerate() if t not in before and t.is_alive()]
    assert left == [], f"threads left behind: {[t.name for t in left]}"


def test_a_scripted_agent_calls_a_real_mcp_server(tmp_path: Path, no_new_threads: None) -> None:
    log = tmp_path / "notes.txt"
    model = ScriptedModel(
        {
            "worker": [
                {"tool_calls": [use("mcp__calc__add", a=20, b=22), use("mcp__calc__pid")]},
                {"tool_calls": [use("mcp__calc__note", text="from the worker")]},
                {"text": "noted: {result0}"},
            ]
        }
    )
    with Runtime(
        [agent("worker")],
        model=model,
        workspace=tmp_path,
        mcp_servers={"calc": server_config(log=log)},
        permissions=Permissions(allow=("mcp__calc__note",)),
    ) as rt:
        outcome = rt.run("worker", "add them", wait=WAIT)
        assert outcome.status is RunStatus.COMPLETED, outcome
        assert rt.mcp.status() == {"calc": "ready"}
        first, second = answers(model, "worker")
        pid = server_pid(first[1].content)
        assert alive(pid)
    assert (first[0].content, first[0].is_error) == ("42", False)
    assert second[0].content == "noted: from the worker" and not second[0].is_error
    assert outcome.result == "noted: noted: from the worker"
    assert log.read_text() == "from the worker\n"
    # the model was shown the server's tools, with the server's schema
    offered = {t.name: t for t in model.requests[0].tools}
    assert {"mcp__calc__add", "mcp__calc__note", "mcp__calc__crash"} <= set(offered)
    assert offered["mcp__calc__add"].input_schema["required"] == ["a", "b"]
    assert offered["mcp__calc__add"].description == "Add two integers."
    assert not alive(pid)  # closing the runtime stopped the server


def test_mcp_tools_go_through_permissions_and_approvals(tmp_path: Path) -> None:
    log = tmp_path / "notes.txt"
    asked: list[ApprovalRequest] = []

    def approve(request: ApprovalRequest) -> bool:
        asked.append(request)
        return request.input.get("text") == "yes"

    script = {
        "worker": [
            {
                "tool_calls": [
                    use("mcp__calc__add", a=1, b=2),  # read-only: never asked
                    use("mcp__calc__note", text="yes"),
                    use("mcp__calc__note", text="no"),
                ]
            },
            "ok",
        ],
        "planner": [
            {"tool_calls": [use("mcp__calc__add", a=1, b=1), use("mcp__calc__note", text="p")]},
            "ok",
        ],
    }
    model = ScriptedModel(script)
    agents = [agent("worker"), agent("planner", permission_mode="plan")]
    with Runtime(
        agents,
        model=model,
        workspace=tmp_path,
        mcp_servers={"calc": server_config(log=log)},
        approve=approve,
    ) as rt:
        rt.run("worker", "go", wait=WAIT)
        rt.run("planner", "go", wait=WAIT)
    ((added, yes, no),) = answers(model, "worker")
    assert added.content == "3" and not added.is_error
    assert yes.content == "noted: yes" and not yes.is_error
    assert no.is_error and no.content.startswith("Permission to use mcp__calc__note was denied")
    assert [r.tool for r in asked] == ["mcp__calc__note", "mcp__calc__note"]
    ((read, refused),) = answers(model, "planner")
    assert read.content == "2" and not read.is_error
    assert refused.is_error and "plan mode is read-only" in refused.content
    assert log.read_text() == "yes\n"


def test_which_runs_get_which_servers(tmp_path: Path) -> None:
    """Inline servers in a definition file, names of runtime servers (mcpServers and
    specializedMCPs), and `tools` that name no MCP tool."""
    team = tmp_path / "agents"
    team.mkdir()
    config = server_config("own")
    (team / "inline.md").write_text(
        "---\nname: inline\ndescription: Has its own server.\ntools: Read\nmcpServers:\n"
        f"  - own:\n      command: {json.dumps(config['command'])}\n"
        f"      args: {json.dumps(config['args'])}\n---\nYou act.\n",
        encoding="utf-8",
    )
    (team / "special.md").write_text(
        "---\nname: special\ndescription: Names a runtime server.\ntools: Read\n"
        "specializedMCPs: [calc]\n---\nYou act.\n",
        encoding="utf-8",
    )
    (team / "plain.md").write_text(
        "---\nname: plain\ndescription: Reads only.\ntools: Read, Grep\n---\nYou act.\n",
        encoding="utf-8",
    )
    (team / "lost.md").write_text(
        "---\nname: lost\ndescription: Names a server nobody has.\ntools: Read\n"
        "mcpServers: [nowhere]\n---\nYou act.\n",
        encoding="utf-8",
    )
    model = ScriptedModel(
        {
            "inline": [{"tool_calls": [use("mcp__own__add", a=1, b=1)]}, "ok"],
            "special": [{"tool_calls": [use("mcp__calc__add", a=2, b=2)]}, "ok"],
            "plain": [{"tool_calls": [use("mcp__calc__add", a=3, b=3)]}, "ok"],
            "lost": [{"tool_calls": [use("mcp__nowhere__add", a=4, b=4)]}, "ok"],
        }
    )
    with Runtime(
        agent_dirs=[team],
        model=model,
        workspace=tmp_path,
        mcp_servers={"calc": server_config("calc")},
        allow_mcp_commands=True,  # the inline server's command, from the file
    ) as rt:
        for name in ("plain", "lost"):
            assert rt.run(name, "go", wait=WAIT).status is RunStatus.COMPLETED
        assert rt.mcp.status() == {}  # nothing needed a server yet
        for name in ("inline", "special"):
            assert rt.run(name, "go", wait=WAIT).status is RunStatus.COMPLETED
        assert rt.mcp.status() == {"own": "ready", "calc": "ready"}
    assert answers(model, "inline")[0][0].content == "2"
    assert answers(model, "special")[0][0].content == "4"
    (plain,) = answers(model, "plain")[0]
    assert plain.is_error and plain.content == "tool 'mcp__calc__add' is not available to plain"
    (lost,) = answers(model, "lost")[0]
    assert lost.is_error and "names MCP server 'nowhere' in mcpServers" in lost.content
    tools_of = {r.agent: {t.name for t in r.tools} for r in model.requests}
    assert tools_of["plain"] == {"Read", "Grep"}
    assert "mcp__own__add" in tools_of["inline"] and "mcp__calc__add" not in tools_of["inline"]
    assert "mcp__calc__add" in tools_of["special"]


def test_a_definitions_own_command_does_not_run_unless_allowed(tmp_path: Path) -> None:
    team = tmp_path / "agents"
    team.mkdir()
    started = tmp_path / "started"
    source = team / "inline.md"
    source.write_text(
        "---\nname: inline\ndescription: Has its own server.\ntools: Read\nmcpServers:\n"
        f"  - own:\n      command: touch\n      args: [{json.dumps(str(started))}]\n"
        "---\nYou act.\n",
        encoding="utf-8",
    )
    model = ScriptedModel({"inline": [{"tool_calls": [use("mcp__own__add", a=1, b=1)]}, "ok"]})
    with Runtime(agent_dirs=[team], model=model, workspace=tmp_path) as rt:
        assert rt.run("inline", "go", wait=WAIT).status is RunStatus.COMPLETED
        assert rt.mcp.status() == {}
    assert not started.exists()  # the command never ran
    ((refused,),) = answers(model, "inline")
    assert refused.is_error
    assert f"agent 'inline' declares MCP server 'own' in mcpServers in {source}" in (
        refused.content
    )
    assert "Runtime(allow_mcp_commands=True)" in refused.content
    assert {t.name for t in model.requests[0].tools} == {"Read"}


def test_a_server_that_crashes_or_cannot_start_is_an_error_the_model_reads(
    tmp_path: Path,
) -> None:
    model = ScriptedModel(
        {
            "worker": [
                {"tool_calls": [use("mcp__calc__crash")]},
                {"tool_calls": [use("mcp__calc__add", a=1, b=1), use("mcp__ghost__find")]},
                {"text": "carried on"},
            ]
        }
    )
    servers = {"calc": server_config(), "ghost": {"command": "no-such-server-xyz"}}
    with Runtime(
        [agent("worker")],
        model=model,
        workspace=tmp_path,
        mcp_servers=servers,
        permissions="bypassPermissions",
    ) as rt:
        outcome = rt.run("worker", "go", wait=WAIT)
    assert outcome.status is RunStatus.COMPLETED and outcome.result == "carried on"
    (crashed,), (after, ghost) = answers(model, "worker")
    assert crashed.is_error and "MCP server 'calc'" in crashed.content
    assert "exited or crashed" in crashed.content and "told to crash" in crashed.content
    assert after.is_error and "MCP server 'calc'" in after.content
    assert ghost.is_error and "MCP server 'ghost'" in ghost.content
    assert "no-such-server-xyz" in ghost.content and "could not start" in ghost.content


def test_a_hung_call_fails_at_mcp_tool_timeout_and_the_run_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCP_TOOL_TIMEOUT", "1000")  # Claude Code's variable, milliseconds
    model = ScriptedModel(
        {"worker": [{"tool_calls": [use("mcp__calc__slow", seconds=3600)]}, {"text": "went on"}]}
    )
    with Runtime(
        [agent("worker")], model=model, workspace=tmp_path, mcp_servers={"calc": server_config()}
    ) as rt:
        outcome = rt.run("worker", "go", wait=WAIT)
    assert outcome.status is RunStatus.COMPLETED and outcome.result == "went on"
    ((hung,),) = answers(model, "worker")
    assert hung.is_error and "MCP server 'calc'" in hung.content
    assert "timed out after 1 s" in hung.content


def test_the_runtime_setting_wins_and_a_bad_one_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCP_TOOL_TIMEOUT", "1000")
    with Runtime([agent("worker")], model=ScriptedModel({}), mcp_tool_timeout=42.0) as rt:
        assert rt.mcp.call_timeout == 42.0 and rt.mcp.blueprint()["call_timeout"] == 42.0
    with pytest.raises(ValueError, match="mcp_tool_timeout must be a positive number"):
        Runtime([agent("worker")], model=ScriptedModel({}), mcp_tool_timeout=0)


def test_mcp_tool_flags_follow_the_servers_hints(tmp_path: Path) -> None:
    model = ScriptedModel({"worker": ["ok"]})
    with Runtime(
        [agent("worker")], model=model, workspace=tmp_path, mcp_servers={"c": server_config()}
    ) as rt:
        from subagents.mcp.tools import as_tools

        tools = as_tools(rt.mcp, rt.mcp.tools_for(agent("worker")))
    add, note = tools["mcp__c__add"], tools["mcp__c__note"]
    assert add.read_only and not add.side_effects and not add.needs_approval
    assert not note.read_only and note.side_effects and note.needs_approval


def test_claude_calls_the_mcp_server_through_the_fake_messages_api(tmp_path: Path) -> None:
    """The anthropic backend sends the server's tool with its schema, gets a tool_use back,
    and the tool_result (the server's answer) goes in the next request."""

    def handler(request: Recorded) -> dict[str, Any]:
        messages = request.body["messages"]
        if len(messages) == 1:
            return tool_use_message([("toolu_1", "mcp__calc__add", {"a": 20, "b": 22})])
        result = messages[-1]["content"][0]
        return text_message(f"the server says {result['content']}")

    with FakeMessagesAPI(handler=handler) as api:
        model = AnthropicModel(api_key="test", base_url=api.url, retry=RetryPolicy(max_attempts=1))
        with Runtime(
            [agent("worker", tools=("mcp__calc__add",))],
            model=model,
            workspace=tmp_path,
            mcp_servers={"calc": server_config()},
        ) as rt:
            outcome = rt.run("worker", "add 20 and 22", wait=WAIT)
        first, second = api.requests
    assert outcome.status is RunStatus.COMPLETED, outcome
    assert outcome.result == "the server says 42"
    (sent,) = first.body["tools"]
    assert sent["name"] == "mcp__calc__add"
    assert sent["description"] == "Add two integers."
    assert sent["input_schema"]["properties"].keys() == {"a", "b"}
    result = second.body["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and result["tool_use_id"] == "toolu_1"
    assert result["content"] == "42" and not result.get("is_error", False)
