"""The built-in agents shipped in the package load cleanly and say what they are for."""

from __future__ import annotations

from pathlib import Path

from subagents.definitions import DefinitionLoader, Level, Source, default_sources, validate
from subagents.definitions.discovery import BUILTIN_DIR

WRITING_TOOLS = {"Write", "Edit", "MultiEdit", "Bash", "NotebookEdit"}


def test_explore_code_and_plan_are_shipped_and_valid():
    specs = DefinitionLoader([Source(str(BUILTIN_DIR), Level.BUILTIN)]).load().specs
    assert sorted(specs) == ["code", "explore", "plan"]
    for spec in specs.values():
        assert validate(spec, strict=True) == []
        assert spec.level == Level.BUILTIN and spec.model == "inherit"
        assert len(spec.prompt) > 500 and len(spec.description) > 60


def test_explore_and_plan_are_read_only_and_code_can_change_things():
    specs = DefinitionLoader([Source(str(BUILTIN_DIR), Level.BUILTIN)]).load().specs
    for name in ("explore", "plan"):
        tools = specs[name].tools
        assert tools is not None and not WRITING_TOOLS & set(tools)
        assert {"Read", "Grep", "Glob", "LS"} <= set(tools)
        # Bash only as read-only git commands, and plan mode on top
        bash = [t for t in tools if t.startswith("Bash")]
        assert bash and all(t.startswith("Bash(git ") for t in bash)
        assert specs[name].permission_mode == "plan"
    assert specs["code"].tools is not None and {"Write", "Edit", "Bash"} <= set(specs["code"].tools)


def test_builtins_are_the_lowest_level_of_the_default_sources(tmp_path: Path):
    project = tmp_path / ".claude" / "agents"
    project.mkdir(parents=True)
    (project / "explore.md").write_text("---\nname: explore\ndescription: mine\n---\nMine.\n")
    loader = DefinitionLoader(default_sources(cwd=tmp_path, home=tmp_path / "nohome"))
    result = loader.load()
    assert result.specs["explore"].description == "mine"
    assert result.specs["code"].level == Level.BUILTIN
    assert [s.name for s in result.shadowed] == ["explore"]
