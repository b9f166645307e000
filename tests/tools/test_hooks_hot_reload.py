"""Hooks planted through hot reload (session 27): with ``allow_hooks=True`` and
``hot_reload_s`` set, a run that may write the agents' folder (here in its workspace) wrote a
definition whose hooks the runtime then ran for the next runs, unasked, and could take away a
guarding ``PreToolUse`` hook; an inline MCP server is such a command too. The hooks and
``mcpServers`` of a file definition are now those read at start
(``definitions/commands_at_start.py``): every other change is reloaded. Through the real
runtime, its registry's hot reload, real files and the real sandbox."""

from __future__ import annotations

import os
import queue
import sys
from pathlib import Path
from typing import Any

import structlog

from subagents.definitions import DefinitionLoader, default_sources
from subagents.definitions.catalog import Catalog, Changes
from subagents.definitions.spec import AgentSpec
from subagents.messages import RunStatus, ToolResultBlock
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime

from .conftest import WAIT


def definition(name: str, hook: str | None = None) -> str:
    """A definition file of an agent with Bash, and a PreToolUse hook on Bash if given."""
    hooks = ""
    if hook is not None:
        hooks = (
            "hooks:\n  PreToolUse:\n    - matcher: Bash\n      hooks:\n"
            f"        - type: command\n          command: {hook!r}\n"
        )
    return f"---\nname: {name}\ndescription: The {name} agent.\ntools: Bash\n{hooks}---\nAct.\n"


def bash(command: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "Bash", "input": {"command": command}}]}


def results(model: ScriptedModel, name: str) -> list[ToolResultBlock]:
    out: list[ToolResultBlock] = []
    for request in model.requests:
        if request.agent == name and request.messages[-1].role == "user":
            out += [b for b in request.messages[-1].content if isinstance(b, ToolResultBlock)]
    return out


def test_a_run_plants_no_hook_and_removes_no_guard_through_hot_reload(repo: Path) -> None:
    """The planter rewrites the guarded agent's definition without its guard (a hook that
    blocks ``touch``) and adds a definition whose hook writes a mark, then a plain one (the
    marker: once the registry has added it, its scan read the other two as written). The
    guarded definition is kept whole as it was (its new description is not taken either:
    a change of tools beside a change of hooks must not come half); the planted one is left
    out until a restart (run without its hooks, a guard of its own would not hold)."""
    agents = repo / ".claude" / "agents"
    agents.mkdir(parents=True)
    guard = "grep -q touch && { echo 'no touching' >&2; exit 2; } || true"
    (agents / "guarded.md").write_text(definition("guarded", guard))
    (agents / "planter.md").write_text(definition("planter"))
    planted = definition("planted", f"touch {repo / 'hook-ran'}")
    unguarded = definition("guarded").replace("The guarded agent.", "Now unguarded.")
    plant = (
        f"cat > .claude/agents/planted.md <<'EOF'\n{planted}EOF\n"
        f"cat > .claude/agents/guarded.new <<'EOF'\n{unguarded}EOF\n"
        "mv .claude/agents/guarded.new .claude/agents/guarded.md\n"  # (never seen half written)
        f"cat > .claude/agents/marker.md <<'EOF'\n{definition('marker')}EOF\n"
    )
    model = ScriptedModel(
        {
            "planter": [bash(plant), "done"],
            "marker": [bash("echo hi"), "ok"],
            "guarded": [bash("touch made"), "ok"],
        }
    )
    changes: queue.Queue[Changes] = queue.Queue()
    with (
        structlog.testing.capture_logs() as logs,
        Runtime(
            model=model,
            workspace=repo,
            agent_dirs=[agents],
            permissions="bypassPermissions",
            allow_hooks=True,
            hot_reload_s=0.05,
        ) as rt,
    ):
        rt.registry.subscribe(changes.put)
        held = rt.registry.get("guarded")
        assert rt.run("planter", "plant", wait=WAIT).status is RunStatus.COMPLETED
        while "marker" not in changes.get(timeout=WAIT).added:
            pass
        assert not rt.registry.has("planted")  # left out until a restart
        assert rt.registry.get("guarded") == held  # kept whole
        assert rt.run("marker", "go", wait=WAIT).status is RunStatus.COMPLETED
        assert rt.run("guarded", "go", wait=WAIT).status is RunStatus.COMPLETED
    assert results(model, "marker")[0].content == "hi"  # a plain new definition is taken
    assert not (repo / "hook-ran").exists()  # the planted hook never ran
    blocked = results(model, "guarded")[0]
    assert (blocked.is_error, blocked.content) == (
        True,
        "PreToolUse hook blocked this call: no touching",
    )
    assert not (repo / "made").exists()
    warned = sorted(e["agent"] for e in logs if "hooks or mcpServers are not" in e["event"])
    assert warned == ["guarded", "planted"], logs


def test_a_definition_given_in_code_takes_its_hooks_as_given(tmp_path: Path) -> None:
    """The program's own definitions (``Level.CODE``, ``registry.register``) are not files a
    run could write: registered after the first load, their hooks are taken."""
    folders = {name: tmp_path / name for name in ("cwd", "home", "defs")}
    for folder in folders.values():
        folder.mkdir()
    sources = default_sources(
        cwd=folders["cwd"], dirs=(folders["defs"],), home=folders["home"], include_builtin=False
    )
    catalog = Catalog(DefinitionLoader(sources))
    hooks = {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "x"}]}]}
    catalog.register(AgentSpec(name="coded", description="d", prompt="p", hooks=hooks))
    assert catalog.get("coded").hooks == hooks


def test_a_code_definition_extending_a_file_keeps_the_hooks_it_inherited(tmp_path: Path) -> None:
    """A definition given in code that ``extends`` a file definition inherits its hooks: a
    run that rewrote the parent's file without its guard took the child's away too (found
    by this session's outsider round). Its hooks are held as first seen."""
    folders = {name: tmp_path / name for name in ("cwd", "home", "defs")}
    for folder in folders.values():
        folder.mkdir()
    parent = folders["defs"] / "base.md"
    parent.write_text(definition("base", "exit 2"))
    sources = default_sources(
        cwd=folders["cwd"], dirs=(folders["defs"],), home=folders["home"], include_builtin=False
    )
    child = AgentSpec(name="child", description="d", prompt="p", extends="base")
    catalog = Catalog(DefinitionLoader(sources), specs=[child])
    guarded = catalog.get("child").hooks
    assert guarded is not None and "exit 2" in str(guarded)
    parent.write_text(definition("base").replace("The base agent.", "Rewritten."))
    os.utime(parent, (parent.stat().st_atime, parent.stat().st_mtime + 5))  # (seen changed)
    base = catalog.get("base")
    catalog.reload()
    assert catalog.get("base") is base  # its hooks changed: kept whole as it was
    assert catalog.get("child").hooks == guarded
    held = catalog.get("child")
    catalog.reload()  # (nothing changed: the loader gives the same specs)
    assert catalog.get("child") is held  # the same object: caches keyed on it still hold


SERVER_APP = Path(__file__).resolve().parent.parent / "mcp_servers" / "mcp_server_app.py"


def test_a_run_plants_no_mcp_server_through_hot_reload(repo: Path) -> None:
    """An inline stdio server in ``mcpServers`` is a command the runtime starts for the
    agent's runs (with ``allow_mcp_commands=True``), as a hook is: a definition planted
    through hot reload with one is left out until a restart, and its server never starts;
    one added naming only the runtime's servers is taken (written last: once it is added,
    the scan read the other)."""
    agents = repo / ".claude" / "agents"
    agents.mkdir(parents=True)
    (agents / "planter.md").write_text(definition("planter"))
    log = repo / "server-ran"
    servers = (
        "mcpServers:\n  - calc\n  - planted:\n"
        f"      command: {sys.executable}\n      args: [{SERVER_APP}, --log, {log}]\n"
    )
    planted = definition("served").replace("tools: Bash\n", f"tools: Bash\n{servers}")
    named = definition("named").replace("tools: Bash\n", "tools: Bash\nmcpServers:\n  - calc\n")
    plant = (
        f"cat > .claude/agents/served.md <<'EOF'\n{planted}EOF\n"
        f"cat > .claude/agents/named.md <<'EOF'\n{named}EOF\n"
    )
    model = ScriptedModel(
        {
            "planter": [bash(plant), "done"],
            "named": [
                {"tool_calls": [{"name": "mcp__planted__note", "input": {"text": "x"}}]},
                {"tool_calls": [{"name": "mcp__calc__add", "input": {"a": 1, "b": 2}}]},
                "ok",
            ],
        }
    )
    changes: queue.Queue[Changes] = queue.Queue()
    calc = {"command": sys.executable, "args": [str(SERVER_APP)]}
    with Runtime(
        model=model,
        workspace=repo,
        agent_dirs=[agents],
        permissions="bypassPermissions",
        mcp_servers={"calc": calc},
        allow_mcp_commands=True,
        hot_reload_s=0.05,
    ) as rt:
        rt.registry.subscribe(changes.put)
        assert rt.run("planter", "plant", wait=WAIT).status is RunStatus.COMPLETED
        while "named" not in changes.get(timeout=WAIT).added:
            pass
        assert not rt.registry.has("served")  # left out until a restart
        assert rt.run("named", "go", wait=WAIT).status is RunStatus.COMPLETED
    note, add = results(model, "named")
    assert note.is_error, note
    assert not log.exists()  # the planted server never started
    assert (add.is_error, add.content) == (False, "3")
