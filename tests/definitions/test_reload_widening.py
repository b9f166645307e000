"""What a reload may change of a definition already given out (session 28,
``definitions/reload_widening.py``): its words (prompt, description) and a narrowing of its
tools; a change that widens anything (tools, ``permissionMode``, ``mcpServers``, isolation,
limits, any field not on the allowlist) keeps the definition whole as it was until a
restart. Through real files and the catalog's reload; then the whole runtime, a run that
rewrites its own definition through its agents folder."""

from __future__ import annotations

import os
import queue
from pathlib import Path

import pytest
import structlog

from subagents.definitions import DefinitionLoader, default_sources
from subagents.definitions.catalog import Catalog, Changes
from subagents.messages import RunStatus, ToolResultBlock
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime

WAIT = 60.0


def md(tools: str = "Read, Grep", prompt: str = "Review.", extra: str = "") -> str:
    return f"---\nname: reviewer\ndescription: Reviews.\ntools: {tools}\n{extra}---\n{prompt}\n"


class Folder:
    """A definitions folder and its catalog, rewritten and reloaded as hot reload does."""

    def __init__(self, root: Path, first: str | None = None) -> None:
        for name in ("cwd", "home", "defs"):
            (root / name).mkdir(parents=True)
        self.file = root / "defs" / "reviewer.md"
        self.file.write_text(md() if first is None else first)
        sources = default_sources(
            cwd=root / "cwd", dirs=(root / "defs",), home=root / "home", include_builtin=False
        )
        self.catalog = Catalog(DefinitionLoader(sources))
        self._tick = 0

    def rewrite(self, text: str) -> None:
        self.file.write_text(text)
        self._tick += 5  # (seen changed by the loader's mtime check)
        stat = self.file.stat()
        os.utime(self.file, (stat.st_atime, stat.st_mtime + self._tick))
        self.catalog.reload()

    @property
    def tools(self) -> tuple[str, ...] | None:
        return self.catalog.get("reviewer").tools


@pytest.fixture
def folder(tmp_path: Path) -> Folder:
    return Folder(tmp_path)


def test_a_prompt_is_taken_and_a_narrowing_too(folder: Folder) -> None:
    folder.rewrite(md(prompt="Review harder."))
    assert folder.catalog.get("reviewer").prompt == "Review harder."
    folder.rewrite(md(tools="Read", prompt="Review harder."))
    assert folder.tools == ("Read",)
    folder.rewrite(md(tools="Read", prompt="Review.", extra="disallowedTools: Grep\n"))
    assert folder.catalog.get("reviewer").disallowed_tools == ("Grep",)


@pytest.mark.parametrize(
    "widening",
    [
        md(tools="Read, Grep, Bash", prompt="Now run anything."),
        md(tools="Read, Grep, Bash(git diff:*)"),
        md(extra="permissionMode: bypassPermissions\n"),
        md(extra="mcpServers:\n  - calc\n"),
        md(extra="maxTurns: 500\n"),
        md(extra="network: on\n"),
    ],
)
def test_a_widening_keeps_the_definition_whole_as_it_was(folder: Folder, widening: str) -> None:
    """With its prompt too (a change must not come half), warned once."""
    before = folder.catalog.get("reviewer")
    with structlog.testing.capture_logs() as logs:
        folder.rewrite(widening)
        folder.rewrite(widening + "\n")  # (the same widening again: no second warning)
    assert folder.catalog.get("reviewer") is before
    # (mcpServers: held by the commands' rule, commands_at_start.py, with its own warning)
    warned = [e for e in logs if "kept whole as it was until a restart" in e["event"]]
    assert len(warned) == 1 and warned[0]["agent"] == "reviewer", logs


def test_a_narrowing_cannot_be_widened_back_nor_every_tool_taken(folder: Folder) -> None:
    """Compared with the definition last given: a run that narrowed an agent cannot widen
    it back to what it was; and leaving ``tools`` out (every tool) widens any list."""
    folder.rewrite(md(tools="Read"))
    folder.rewrite(md(tools="Read, Grep"))
    assert folder.tools == ("Read",)
    folder.rewrite("---\nname: reviewer\ndescription: Reviews.\n---\nReview.\n")
    assert folder.tools == ("Read",)


def test_a_deleted_definition_does_not_come_back_as_it_was(folder: Folder) -> None:
    """Its owner deletes it (gone at the reload); written again wider (Bash) with a new
    prompt, it is left out until a restart, with a warning: not given back as the deleted
    definition (its old prompt), nor taken as new (the name is one the lead may grant)."""
    folder.file.unlink()
    folder.catalog.reload()
    assert not folder.catalog.has("reviewer")
    with structlog.testing.capture_logs() as logs:
        folder.rewrite(md(tools="Read, Grep, Bash", prompt="Run anything."))
    assert not folder.catalog.has("reviewer")
    assert any("it was removed, and is back wider" in e["event"] for e in logs), logs


def test_a_deleted_definition_back_no_wider_is_taken_as_now(folder: Folder) -> None:
    """An editor's save that deletes, then writes: its words are taken, as a reload's are."""
    folder.file.unlink()
    folder.catalog.reload()
    folder.rewrite(md(tools="Read", prompt="Review anew."))
    assert folder.catalog.get("reviewer").prompt == "Review anew."
    assert folder.tools == ("Read",)


def test_a_definition_caught_half_written_is_held_not_counted_deleted(folder: Folder) -> None:
    """A scan catches the file half written (an editor, or ``cat >``, writing it in place:
    here empty): it fails to load, but its file is there, so it is not a deletion; its next
    version, wider, is held to the one given out, as any change is: the agent stays (it was
    left out until a restart: gone for a write's window; CI saw it)."""
    given = folder.catalog.get("reviewer")
    folder.rewrite("")
    assert not folder.catalog.has("reviewer")  # (nothing to load meanwhile)
    folder.rewrite(md(tools="Read, Grep, Bash", prompt="Run anything."))
    assert folder.catalog.get("reviewer") == given


def test_isolation_is_neither_dropped_nor_added(tmp_path: Path) -> None:
    """``isolation: worktree`` (kept in the spec's metadata) keeps a run off the main tree:
    no reload drops it; and, fail closed, none adds it either (a field off the allowlist)."""
    isolated = Folder(tmp_path / "a", md(extra="isolation: worktree\n"))
    isolated.rewrite(md())
    assert isolated.catalog.get("reviewer").metadata.get("isolation") == "worktree"
    plain = Folder(tmp_path / "b")
    plain.rewrite(md(extra="isolation: worktree\n"))
    assert plain.catalog.get("reviewer").metadata.get("isolation") is None


def bash(command: str) -> dict[str, object]:
    return {"tool_calls": [{"name": "Bash", "input": {"command": command}}]}


def test_a_run_does_not_give_its_own_agent_bash_through_its_folder(tmp_path: Path) -> None:
    """An editor (Bash, Write) rewrites the reviewer's file in its workspace's agents folder
    to offer Bash; the next reviewer run is offered what the owner gave it (Read), and its
    Bash call is refused; a definition added after (the marker) shows the scan read the
    rewrite."""
    agents = tmp_path / ".claude" / "agents"
    agents.mkdir(parents=True)
    (agents / "reviewer.md").write_text(md(tools="Read"))
    (agents / "editor.md").write_text(md(tools="Bash").replace("reviewer", "editor"))
    marker = md(tools="Read").replace("reviewer", "marker")
    # (written aside and moved in: the file is never seen empty, half written, or gone by a
    # scan between, which would make it a removed definition back wider: left out)
    plant = (
        f"cat > .claude/agents/reviewer.new <<'EOF'\n{md(tools='Read, Bash')}EOF\n"
        "mv .claude/agents/reviewer.new .claude/agents/reviewer.md\n"
        f"cat > .claude/agents/marker.md <<'EOF'\n{marker}EOF\n"
    )
    model = ScriptedModel({"editor": [bash(plant), "done"], "reviewer": [bash("id"), "ok"]})
    changes: queue.Queue[Changes] = queue.Queue()
    with Runtime(
        model=model,
        workspace=tmp_path,
        agent_dirs=[agents],
        permissions="bypassPermissions",
        hot_reload_s=0.05,
    ) as rt:
        rt.registry.subscribe(changes.put)
        assert rt.run("editor", "widen", wait=WAIT).status is RunStatus.COMPLETED
        while "marker" not in changes.get(timeout=WAIT).added:
            pass
        assert rt.registry.get("reviewer").tools == ("Read",)
        assert rt.run("reviewer", "go", wait=WAIT).status is RunStatus.COMPLETED
    answers = [
        b
        for r in model.requests
        if r.agent == "reviewer" and r.messages[-1].role == "user"
        for b in r.messages[-1].content
        if isinstance(b, ToolResultBlock)
    ]
    assert len(answers) == 1 and answers[0].is_error, answers
    assert "Bash" in answers[0].content, answers[0].content
