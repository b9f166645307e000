"""Claude Code's MCP resource tools against the real test server (mcp_server_app.py), through
the hub and through a whole run."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from subagents.definitions.spec import AgentSpec
from subagents.mcp import McpHub, parse_servers
from subagents.mcp.resources import LIST, READ, resource_tools
from subagents.messages import RunStatus, ToolResultBlock
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime
from subagents.tools.base import ToolError, ToolResult

from .conftest import START_WAIT_S, server_config
from .mcp_server_app import DOT_PNG

WAIT = 60.0


def spec(name: str = "worker", **fields: object) -> AgentSpec:
    return AgentSpec(name=name, description="d", **fields)  # type: ignore[arg-type]


def test_list_and_read_resources_of_the_runs_servers(tmp_path: Path) -> None:
    servers = parse_servers({"calc": server_config(), "other": server_config("other")})
    with McpHub(servers, cwd=tmp_path, start_timeout=START_WAIT_S) as hub:
        run = hub.tools_for(spec())
        tools = resource_tools(hub, run)
        listed = json.loads(tools[LIST].call({}))
        assert {(r["server"], r["uri"]) for r in listed} == {
            ("calc", "notes://readme"), ("calc", "images://dot"),
            ("other", "notes://readme"), ("other", "images://dot"),
        }  # fmt: skip
        readme = next(r for r in listed if r["server"] == "calc" and r["name"] == "readme")
        assert readme["mimeType"] == "text/plain" and readme["description"] == "The notes."
        only = json.loads(tools[LIST].call({"server": "other"}))
        assert {r["server"] for r in only} == {"other"}
        assert tools[READ].call({"server": "other", "uri": "notes://readme"}) == "notes of other"
        image = tools[READ].run({"server": "calc", "uri": "images://dot"}, None)
        assert isinstance(image, ToolResult)
        (attached,) = image.attachments
        assert attached.media_type == "image/png" and base64.b64decode(attached.data) == DOT_PNG
        with pytest.raises(ToolError, match="could not read notes://nothing"):
            tools[READ].call({"server": "calc", "uri": "notes://nothing"})
        with pytest.raises(ToolError, match=r"no MCP server 'ghost' for this run \(its servers"):
            tools[READ].call({"server": "ghost", "uri": "notes://readme"})
        # a run whose definition reaches no server gets no resource tools
        assert resource_tools(hub, hub.tools_for(spec(tools=("Read",)))) == {}
        # nor one whose tools leave them out, or name one of them only
        assert resource_tools(hub, hub.tools_for(spec(tools=("mcp__calc__add",)))) == {}
        only_read = hub.tools_for(spec(tools=("mcp__calc__add", READ)))
        assert set(resource_tools(hub, only_read)) == {READ}


def test_a_run_in_plan_mode_reads_a_resource(tmp_path: Path) -> None:
    model = ScriptedModel(
        {
            "worker": [
                {"tool_calls": [{"name": LIST, "input": {}}]},
                {
                    "tool_calls": [
                        {"name": READ, "input": {"server": "calc", "uri": "notes://readme"}}
                    ]
                },
                "read: {result0}",
            ]
        }
    )
    with Runtime(
        [spec()], model=model, workspace=tmp_path, mcp_servers={"calc": server_config()},
        permissions="plan",
    ) as rt:  # fmt: skip
        outcome = rt.run("worker", "read the notes", wait=WAIT)
    assert outcome.status is RunStatus.COMPLETED, outcome
    assert outcome.result == "read: notes of testsrv"
    offered = {t.name for t in model.requests[0].tools}
    assert {LIST, READ} <= offered
    first = [b for b in model.requests[1].messages[-1].content if isinstance(b, ToolResultBlock)]
    assert not first[0].is_error and "notes://readme" in first[0].content
