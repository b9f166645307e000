"""McpHub against a real stdio MCP server (tests/mcp/mcp_server_app.py, written with the mcp
SDK) and against servers that misbehave: lazy start, sharing, calls, crashes, hangs, stops."""

from __future__ import annotations

import math
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from subagents.definitions.spec import AgentSpec
from subagents.mcp import McpCallError, McpHub, McpServerError, parse_servers
from subagents.mcp.hub import CALL_TIMEOUT, mcp_tool_timeout

from .conftest import (
    START_WAIT_S,
    alive,
    dying_server,
    free_port,
    http_server,
    server_config,
    server_pid,
    silent_server,
)

WAIT = 30.0


def spec(name: str = "worker", **fields: object) -> AgentSpec:
    return AgentSpec(name=name, description="d", **fields)  # type: ignore[arg-type]


def hub_with(tmp_path: Path, **servers: object) -> McpHub:
    return McpHub(parse_servers(servers), cwd=tmp_path, start_timeout=START_WAIT_S)


def test_no_thread_and_no_process_until_a_run_needs_a_server(tmp_path: Path) -> None:
    with hub_with(tmp_path, calc=server_config()) as hub:
        assert hub.loop_thread is None
        nothing = hub.tools_for(spec(tools=("Read",)))  # names no MCP tool: starts nothing
        assert nothing.tools == () and hub.loop_thread is None and hub.status() == {}
        run = hub.tools_for(spec())
        assert hub.status() == {"calc": "ready"}
        assert hub.loop_thread is not None and hub.loop_thread.is_alive()
        names = {t.name for t in run.tools}
        assert {"mcp__calc__add", "mcp__calc__note", "mcp__calc__crash"} <= names


@pytest.fixture(scope="module")
def notes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("notes") / "notes.txt"


@pytest.fixture(scope="module")
def shared(notes: Path) -> Iterator[McpHub]:
    """One hub and one server process for the tests that do not stop or break it."""
    servers = parse_servers({"calc": server_config(log=notes)})
    # allow_commands: a test below gives definitions servers of their own (inline)
    with McpHub(servers, start_timeout=START_WAIT_S, allow_commands=True) as hub:
        yield hub


def test_tools_carry_the_servers_schema_and_read_only_hint(shared: McpHub) -> None:
    run = shared.tools_for(spec())
    add, note = run.tool("mcp__calc__add"), run.tool("mcp__calc__note")
    assert add is not None and note is not None
    assert add.tool == "add" and add.server == "calc"
    assert add.input_schema["properties"].keys() == {"a", "b"}
    assert add.input_schema["required"] == ["a", "b"]
    assert "Add two integers" in add.description
    assert add.read_only and add.idempotent
    assert not note.read_only and not note.idempotent


def test_a_call_answers_with_the_servers_text(shared: McpHub, notes: Path) -> None:
    hub, log = shared, notes
    run = hub.tools_for(spec())
    assert hub.call(run, "mcp__calc__add", {"a": 20, "b": 22}).text == "42"
    noted = hub.call(run, "mcp__calc__note", {"text": "hello"})
    assert noted.text == "noted: hello" and not noted.is_error
    assert log.read_text() == "hello\n"
    failed = hub.call(run, "mcp__calc__fail", {"reason": "no such branch"})
    assert failed.is_error and "no such branch" in failed.text
    bad = hub.call(run, "mcp__calc__add", {"a": "x"})
    assert bad.is_error and "a" in bad.text
    with pytest.raises(LookupError, match="mcp__calc__nope is not an MCP tool"):
        hub.call(run, "mcp__calc__nope", {})


def test_runs_share_one_server_process(shared: McpHub) -> None:
    hub = shared
    first, second = hub.tools_for(spec("a")), hub.tools_for(spec("b"))
    pids = {hub.call(run, "mcp__calc__pid", {}).text for run in (first, second)}
    assert len(pids) == 1
    # the same inline configuration in two definitions is one server too
    inline = [{"own": server_config("own")}]
    x = hub.tools_for(spec("x", mcp_servers=inline, tools=("Read",)))
    y = hub.tools_for(spec("y", mcp_servers=inline, tools=("Read",)))
    assert [t.name for t in x.tools if t.name.endswith("__pid")] == ["mcp__own__pid"]
    own = {hub.call(run, "mcp__own__pid", {}).text for run in (x, y)}
    assert len(own) == 1 and own != pids


def test_concurrent_first_uses_start_one_process(tmp_path: Path) -> None:
    with hub_with(tmp_path, calc=server_config()) as hub:  # a new hub: nothing started yet
        runs: list[object] = []
        errors: list[BaseException] = []

        def use() -> None:
            try:
                run = hub.tools_for(spec())
                runs.append(hub.call(run, "mcp__calc__pid", {}).text)
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=use) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(WAIT * 2)
        assert errors == [] and len(runs) == 4 and len(set(runs)) == 1


def test_a_server_that_crashes_mid_call_gives_an_error_naming_it(tmp_path: Path) -> None:
    with hub_with(tmp_path, calc=server_config()) as hub:
        run = hub.tools_for(spec())
        pid = server_pid(hub.call(run, "mcp__calc__pid", {}).text)
        with pytest.raises(McpServerError) as caught:
            hub.call(run, "mcp__calc__crash", {})
        message = str(caught.value)
        assert caught.value.server == "calc"
        assert "MCP server 'calc'" in message and "mcp__calc__crash" in message
        assert "exited or crashed" in message
        assert "told to crash" in message  # the end of its stderr
        # later calls of the same run say so at once, naming the server
        with pytest.raises(McpServerError, match=r"'calc'.*(not running|stopped)"):
            hub.call(run, "mcp__calc__add", {"a": 1, "b": 2})
        assert hub.status() == {"calc": "dead"}
        # the next run that needs it gets a new process
        again = hub.tools_for(spec())
        new_pid = server_pid(hub.call(again, "mcp__calc__pid", {}).text)
        assert new_pid != pid and alive(new_pid) and not alive(pid)


def test_a_command_that_does_not_exist_is_a_failure_naming_server_and_command(
    tmp_path: Path,
) -> None:
    with hub_with(tmp_path, ghost={"command": "no-such-mcp-server-xyz", "args": []}) as hub:
        run = hub.tools_for(spec())
        assert run.tools == ()
        reason = run.failures["ghost"]
        assert "MCP server 'ghost'" in reason and "could not start" in reason
        assert "no-such-mcp-server-xyz" in reason and "not found" in reason
        with pytest.raises(McpServerError, match=r"ghost.*could not start"):
            hub.call(run, "mcp__ghost__anything", {})
        # failed for good: a second run hears the same without a second try
        assert hub.tools_for(spec("other")).failures["ghost"] == reason


def test_a_server_that_exits_at_start_quotes_its_stderr(tmp_path: Path) -> None:
    with hub_with(tmp_path, dying=dying_server(tmp_path)) as hub:
        reason = hub.tools_for(spec()).failures["dying"]
        assert "MCP server 'dying'" in reason and "could not start" in reason
        assert "boom: missing API token" in reason


def test_a_server_that_never_answers_fails_after_the_start_timeout(tmp_path: Path) -> None:
    with McpHub(parse_servers({"mute": silent_server(tmp_path)}), start_timeout=1.0) as hub:
        run = hub.tools_for(spec())
        assert run.tools == ()
        assert "MCP server 'mute'" in run.failures["mute"]
        assert (
            "did not finish starting (initialize and tools/list) within 1 s"
            in (run.failures["mute"])
        )
        assert hub.status() == {"mute": "failed"}


def test_a_stopped_run_gets_its_call_back_at_once_and_the_server_lives_on(
    shared: McpHub,
) -> None:
    hub = shared
    run = hub.tools_for(spec())
    cancel = threading.Event()
    outcome: list[BaseException] = []
    started = threading.Event()

    def call() -> None:
        started.set()
        try:
            hub.call(run, "mcp__calc__slow", {"seconds": 600}, cancel=cancel)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=call)
    thread.start()
    assert started.wait(WAIT)
    cancel.set()
    thread.join(WAIT)
    assert not thread.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], McpCallError)
    assert "'calc'" in str(outcome[0]) and "stopped" in str(outcome[0])
    assert hub.call(run, "mcp__calc__add", {"a": 2, "b": 3}).text == "5"


def test_a_call_past_the_runs_deadline_is_an_error_naming_the_server(shared: McpHub) -> None:
    hub = shared
    run = hub.tools_for(spec())
    with pytest.raises(McpCallError, match=r"'calc'.*deadline passed"):
        hub.call(run, "mcp__calc__slow", {"seconds": 600}, deadline=time.monotonic() + 0.5)
    with pytest.raises(McpCallError, match="deadline"):
        hub.call(run, "mcp__calc__add", {"a": 1, "b": 1}, deadline=time.monotonic() - 1)


def test_a_call_past_its_timeout_fails_alone_and_the_server_lives_on(shared: McpHub) -> None:
    hub = shared
    run = hub.tools_for(spec())
    with pytest.raises(McpCallError, match=r"'calc'.*timed out after 0.5 s.*MCP_TOOL_TIMEOUT"):
        hub.call(run, "mcp__calc__slow", {"seconds": 600}, timeout=0.5)
    assert hub.call(run, "mcp__calc__add", {"a": 2, "b": 3}).text == "5"
    assert hub.status()["calc"] == "ready"


def test_the_call_timeout_is_the_runtimes_setting_else_mcp_tool_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("MCP_TOOL_TIMEOUT", raising=False)
    assert mcp_tool_timeout() == CALL_TIMEOUT
    monkeypatch.setenv("MCP_TOOL_TIMEOUT", "2500")  # milliseconds, as Claude Code reads it
    assert mcp_tool_timeout() == 2.5
    assert mcp_tool_timeout(7.0) == 7.0
    monkeypatch.setenv("MCP_TOOL_TIMEOUT", "soon")
    assert mcp_tool_timeout() == CALL_TIMEOUT
    for bad in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(ValueError, match="mcp_tool_timeout must be a positive number"):
            mcp_tool_timeout(bad)


def test_close_stops_every_server_process_and_the_loop_thread(tmp_path: Path) -> None:
    hub = hub_with(tmp_path, a=server_config("a"), b=server_config("b"))
    run = hub.tools_for(spec())
    pids = [server_pid(hub.call(run, f"mcp__{s}__pid", {}).text) for s in ("a", "b")]
    assert all(alive(p) for p in pids)
    thread = hub.loop_thread
    hub.close()
    assert thread is not None and not thread.is_alive()
    assert not any(alive(p) for p in pids)
    with pytest.raises(McpServerError, match="closed"):
        hub.tools_for(spec())


def test_close_while_a_server_is_starting_does_not_hang(tmp_path: Path) -> None:
    hub = McpHub(parse_servers({"mute": silent_server(tmp_path)}), start_timeout=600.0)
    got: list[object] = []
    thread = threading.Thread(target=lambda: got.append(hub.tools_for(spec())))
    thread.start()
    deadline = time.monotonic() + WAIT
    while hub.status().get("mute") != "starting" and time.monotonic() < deadline:
        threading.Event().wait(0.01)
    hub.close()
    thread.join(WAIT)
    assert not thread.is_alive()
    assert len(got) == 1
    assert "runtime closed" in got[0].failures["mute"]  # type: ignore[attr-defined]


@pytest.mark.parametrize("transport", ["http", "sse"])
def test_remote_servers_over_http_and_sse_with_headers(transport: str) -> None:
    path = "/mcp" if transport == "http" else "/sse"
    with http_server(transport) as port:
        config = {
            "type": transport,
            "url": f"http://127.0.0.1:{port}{path}",
            "headers": {"X-Api-Key": "s3cret"},
        }
        with McpHub(parse_servers({"remote": config}), start_timeout=START_WAIT_S) as hub:
            run = hub.tools_for(spec())
            assert run.failures == {}
            assert hub.call(run, "mcp__remote__add", {"a": 2, "b": 40}).text == "42"
            assert hub.call(run, "mcp__remote__header", {"name": "X-Api-Key"}).text == "s3cret"


def test_a_remote_server_that_is_not_there_is_a_failure_naming_it() -> None:
    config = {"type": "http", "url": f"http://127.0.0.1:{free_port()}/mcp"}
    with McpHub(parse_servers({"gone": config}), start_timeout=WAIT) as hub:
        reason = hub.tools_for(spec()).failures["gone"]
    assert "MCP server 'gone' (http http://127.0.0.1:" in reason and "could not start" in reason


def test_without_the_mcp_sdk_a_server_fails_saying_how_to_install_it(tmp_path: Path) -> None:
    script = tmp_path / "no_sdk.py"
    script.write_text(
        "import sys\n"
        "sys.modules['mcp'] = None  # as if the optional extra were not installed\n"
        "from subagents.definitions.spec import AgentSpec\n"
        "from subagents.mcp import McpHub, parse_servers\n"
        "with McpHub(parse_servers({'calc': {'command': 'anything'}})) as hub:\n"
        "    print(hub.tools_for(AgentSpec(name='a', description='d')).failures['calc'])\n",
        encoding="utf-8",
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=WAIT
    )
    assert done.returncode == 0, done.stderr
    assert "MCP server 'calc'" in done.stdout
    assert "the mcp SDK is not installed (pip install 'subagents[mcp]')" in done.stdout
