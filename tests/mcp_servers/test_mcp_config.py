"""MCP server configurations in Claude Code's shapes, and which servers and tools a
definition's runs get (pure: nothing is started)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from subagents.definitions.spec import AgentSpec
from subagents.mcp import (
    McpConfigError,
    McpHub,
    McpTool,
    RemoteServer,
    StdioServer,
    exposed_name,
    parse_server,
    parse_servers,
)
from subagents.mcp.config import find_mcp_json, read_mcp_json
from subagents.mcp.selection import offered, servers_for, wanted


def spec(**fields: Any) -> AgentSpec:
    return AgentSpec(name=fields.pop("name", "a"), description="d", **fields)


def tool(server: str, name: str) -> McpTool:
    return McpTool(server, name, exposed_name(server, name), "", {"type": "object"})


# ---- shapes ---------------------------------------------------------------------------------


def test_the_three_shapes() -> None:
    stdio = parse_server("fs", {"command": "npx", "args": ["-y", "srv", 3], "env": {"A": "1"}})
    assert stdio.config == StdioServer(command="npx", args=("-y", "srv", "3"), env=(("A", "1"),))
    http = parse_server("gh", {"type": "http", "url": "https://x/mcp", "headers": {"K": "v"}})
    assert http.config == RemoteServer(transport="http", url="https://x/mcp", headers=(("K", "v"),))
    sse = parse_server("s", {"type": "sse", "url": "http://localhost:1/sse"})
    assert sse.config.kind == "sse"
    assert parse_server("t", {"type": "streamable-http", "url": "http://h/"}).config.kind == "http"
    assert parse_server("u", {"url": "http://h/"}).config.kind == "http"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("npx srv", "expected a mapping"),
        ({"args": ["x"], "type": "stdio"}, "needs a command"),
        ({"command": ""}, "command is empty"),
        ({"command": "x", "args": "a b"}, "args must be a list"),
        ({"command": "x", "env": {"A": None}}, "env.A must be text"),
        ({"command": "x", "url": "http://h"}, "unknown key(s) url for a stdio server"),
        ({"type": "http"}, "needs a url"),
        ({"type": "http", "url": "ftp://h"}, "must start with http"),
        ({"type": "websocket", "url": "ws://h"}, "unknown type 'websocket'"),
        ({"type": 3}, "type must be text"),
    ],
)
def test_bad_shapes_are_errors_naming_the_server(raw: Any, message: str) -> None:
    with pytest.raises(McpConfigError) as caught:
        parse_server("broken", raw, origin="agent 'x' mcpServers")
    assert "MCP server 'broken' (agent 'x' mcpServers)" in str(caught.value)
    assert message in str(caught.value)


def test_variables_are_expanded_in_files_only() -> None:
    env = {"TOKEN": "s3cret", "HOME": "/home/u"}
    raw = {
        "command": "${HOME}/bin/srv",
        "args": ["--port", "${PORT:-8080}"],
        "env": {"API_TOKEN": "${TOKEN}"},
    }
    server = parse_server("x", raw, expand=True, environ=env)
    assert isinstance(server.config, StdioServer)
    assert server.config.command == "/home/u/bin/srv"
    assert server.config.args == ("--port", "8080")
    assert server.config.env == (("API_TOKEN", "s3cret"),)
    code = parse_server("x", raw, expand=False, environ=env)
    assert code.config.describe().startswith("${HOME}")
    with pytest.raises(McpConfigError, match="environment variable MISSING is not set"):
        parse_server("x", {"command": "${MISSING}"}, expand=True, environ=env)


def test_mcp_json_is_read_and_found_walking_up(tmp_path: Path) -> None:
    project = tmp_path / "project"
    deep = project / "a" / "b"
    deep.mkdir(parents=True)
    (project / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"calc": {"command": "calc-srv", "args": ["--x"]}}}),
        encoding="utf-8",
    )
    found = find_mcp_json(deep)
    assert found == project / ".mcp.json"
    servers = read_mcp_json(found)
    assert servers["calc"].config == StdioServer(command="calc-srv", args=("--x",))
    assert servers["calc"].origin == str(found)
    hub = McpHub.from_config(
        {"other": {"command": "o"}}, discover=True, cwd=deep, allow_commands=True
    )
    assert set(hub.servers) == {"calc", "other"}
    replaced = McpHub.from_config({"calc": {"command": "mine"}}, discover=True, cwd=deep)
    assert replaced.servers["calc"].config == StdioServer(command="mine")
    assert set(McpHub.from_config(None, discover=False, cwd=deep).servers) == set()


def test_a_projects_stdio_servers_start_only_when_commands_are_allowed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A cloned repository's .mcp.json must not run its commands unasked (Claude Code asks);
    its remote servers start no command and are kept."""
    (tmp_path / ".mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "evil": {"command": "sh", "args": ["-c", "touch pwned"]},
                    "docs": {"type": "http", "url": "http://127.0.0.1:9/mcp"},
                }
            }
        ),
        encoding="utf-8",
    )
    hub = McpHub.from_config(None, discover=True, cwd=tmp_path)
    assert set(hub.servers) == {"docs"}
    warned = capsys.readouterr().err
    assert "evil" in warned and "sh -c touch pwned" in warned
    assert "--allow-mcp-commands" in warned
    allowed = McpHub.from_config(None, discover=True, cwd=tmp_path, allow_commands=True)
    assert set(allowed.servers) == {"evil", "docs"}


@pytest.mark.parametrize(
    ("text", "message"),
    [("{not json", "not valid JSON"), ('{"mcpServers": []}', "expected")],
)
def test_a_bad_mcp_json_names_the_file(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / ".mcp.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(McpConfigError) as caught:
        read_mcp_json(path)
    assert str(path) in str(caught.value) and message in str(caught.value)


def test_runtime_servers_accept_the_mcp_json_shape_too() -> None:
    wrapped = parse_servers({"mcpServers": {"a": {"command": "x"}}})
    assert set(wrapped) == {"a"}
    with pytest.raises(McpConfigError, match="must be a mapping"):
        parse_servers(["a"])


# ---- names ----------------------------------------------------------------------------------


def test_tool_names() -> None:
    assert exposed_name("github", "create_issue") == "mcp__github__create_issue"
    assert exposed_name("my.server", "do it") == "mcp__my_server__do_it"
    long = exposed_name("s" * 40, "t" * 40)
    assert len(long) == 64 and long.startswith("mcp__ssss")
    assert long != exposed_name("s" * 40, "t" * 39 + "u")


# ---- which servers, which tools -------------------------------------------------------------

RUNTIME = parse_servers({"github": {"command": "gh-srv"}, "jira": {"command": "jira-srv"}})


def test_definition_servers_in_every_shape() -> None:
    listed = servers_for(
        spec(mcp_servers=["github", {"local": {"command": "local-srv"}}]),
        RUNTIME,
        allow_commands=True,
    )
    assert set(listed.servers) == {"github", "jira", "local"}
    assert listed.granted == {"github", "local"} and listed.broken == {}
    assert listed.servers["local"].origin.startswith("agent 'a' mcpServers")
    mapping = servers_for(
        spec(mcp_servers={"github": None, "x": {"command": "x"}}), RUNTIME, allow_commands=True
    )
    assert mapping.granted == {"github", "x"} and mapping.broken == {}
    text = servers_for(spec(mcp_servers="github, jira"), RUNTIME)
    assert text.granted == {"github", "jira"}
    specialized = servers_for(spec(metadata={"specializedMCPs": ["jira"]}), RUNTIME)
    assert specialized.granted == {"jira"} and specialized.broken == {}


def test_an_inline_server_replaces_a_runtime_one_of_the_same_name() -> None:
    run = servers_for(
        spec(mcp_servers=[{"github": {"command": "my-gh"}}]), RUNTIME, allow_commands=True
    )
    assert run.servers["github"].config == StdioServer(command="my-gh")


def test_a_definitions_own_command_needs_the_runtimes_allowance() -> None:
    own = spec(mcp_servers=["github", {"local": {"command": "local-srv", "args": ["--x"]}}])
    run = servers_for(own, RUNTIME)
    assert "local" not in run.servers and "github" in run.servers
    assert "local" in run.granted  # a call of its tools answers with why
    reason = run.broken["local"]
    assert reason.startswith("agent 'a' declares MCP server 'local' in mcpServers")
    assert "would run the command 'local-srv --x'" in reason
    assert "Runtime(allow_mcp_commands=True)" in reason and "--allow-mcp-commands" in reason
    # replacing a runtime server with another command is refused too (not silently the
    # runtime's own instead)
    swapped = servers_for(spec(mcp_servers=[{"github": {"command": "my-gh"}}]), RUNTIME)
    assert "github" not in swapped.servers and "'my-gh'" in swapped.broken["github"]
    # the runtime's own server, written again inline, is the owner's: trusted
    same = servers_for(spec(mcp_servers=[{"github": {"command": "gh-srv"}}]), RUNTIME)
    assert same.broken == {} and same.servers["github"].config == StdioServer(command="gh-srv")
    # a remote server starts no command: no allowance needed
    remote = servers_for(spec(mcp_servers=[{"r": {"type": "http", "url": "http://h/"}}]), RUNTIME)
    assert remote.broken == {} and "r" in remote.servers


def test_unknown_names_and_bad_entries_are_broken_not_fatal() -> None:
    run = servers_for(
        spec(
            mcp_servers=["nope", {"bad": {"type": "http"}}, "github"],
            metadata={"specializedMCPs": ["ghost"]},
        ),
        RUNTIME,
    )
    assert "github" in run.servers and "nope" not in run.servers and "bad" not in run.servers
    assert "names MCP server 'nope' in mcpServers" in run.broken["nope"]
    assert "runtime servers: github, jira" in run.broken["nope"]
    assert "in specializedMCPs" in run.broken["ghost"]
    assert "needs a url" in run.broken["bad"]
    shape = servers_for(spec(mcp_servers=42), RUNTIME)
    assert "must be a list of server names" in shape.broken["<mcpServers>"]


def test_which_tools_are_offered() -> None:
    gh, jira = tool("github", "create_issue"), tool("jira", "search")
    # no `tools`: every tool of every server
    assert offered(spec(), gh, ()) and offered(spec(), jira, ())
    # `tools` without MCP names: none, unless the definition names the server
    assert not offered(spec(tools=("Read",)), gh, ())
    assert offered(spec(tools=("Read",)), gh, {"github"})
    # the three forms in `tools`
    for entry in ("mcp__github__create_issue", "mcp__github", "mcp__github__*", "mcp__git*"):
        assert offered(spec(tools=(entry,)), gh, ()), entry
        assert not offered(spec(tools=(entry,)), jira, ()), entry
    # disallowedTools takes away, even from a granted server
    assert not offered(spec(disallowed_tools=("mcp__github",)), gh, {"github"})
    assert not offered(spec(disallowed_tools=("mcp__github__create_issue",)), gh, ())
    assert offered(spec(disallowed_tools=("mcp__github__other",)), gh, ())


def test_only_servers_that_could_offer_a_tool_are_started() -> None:
    def started(s: AgentSpec) -> set[str]:
        return {n.name for n in wanted(s, servers_for(s, RUNTIME))}

    assert started(spec()) == {"github", "jira"}
    assert started(spec(tools=("Read", "Grep"))) == set()
    assert started(spec(tools=("Read", "mcp__jira__search"))) == {"jira"}
    assert started(spec(tools=("Read",), mcp_servers=["github"])) == {"github"}
    assert started(spec(disallowed_tools=("mcp__jira",))) == {"github"}
    assert not McpHub(RUNTIME).uses_servers(spec(tools=("Read",)))
    assert McpHub(RUNTIME).uses_servers(spec())
    assert not McpHub({}).uses_servers(spec())
