"""Discovery: levels and priority, shadowing, duplicates, categories, and cheap reloads."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from subagents.definitions import (
    AgentSpec,
    Changes,
    DefinitionError,
    DefinitionLoader,
    Level,
    Shadowed,
    Source,
    default_sources,
)
from subagents.definitions.discovery import BUILTIN_DIR


def write(path: Path, name: str, description: str = "d", extra: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\nname: {name}\ndescription: {description}\n{extra}---\nPrompt.\n")
    return path


def test_default_sources_order_and_levels(tmp_path: Path):
    home = tmp_path / "home"
    (home / ".claude" / "agents").mkdir(parents=True)
    project = tmp_path / "work" / "proj"
    (project / ".claude" / "agents").mkdir(parents=True)
    cwd = project / "src" / "pkg"
    cwd.mkdir(parents=True)
    extra = tmp_path / "extra"
    sources = default_sources(cwd=cwd, dirs=[extra], home=home)
    assert sources == [
        Source(str(project / ".claude" / "agents"), Level.PROJECT),
        Source(str(extra), Level.DIRS),
        Source(str(home / ".claude" / "agents"), Level.USER),
        Source(str(BUILTIN_DIR), Level.BUILTIN),
    ]
    assert default_sources(cwd=cwd, home=tmp_path / "nohome", include_builtin=False) == [
        Source(str(project / ".claude" / "agents"), Level.PROJECT)
    ]


def test_walking_up_inside_home_does_not_count_the_user_dir_twice(tmp_path: Path):
    home = tmp_path / "home"
    (home / ".claude" / "agents").mkdir(parents=True)
    cwd = home / "code" / "x"
    cwd.mkdir(parents=True)
    sources = default_sources(cwd=cwd, home=home, include_builtin=False)
    assert sources == [Source(str(home / ".claude" / "agents"), Level.USER)]


def test_recursive_scan_with_categories_and_readmes_skipped(tmp_path: Path):
    root = tmp_path / "agents"
    write(root / "top.md", "top")
    write(root / "lang" / "python" / "py.md", "py")
    write(root / "README.md", "readme-agent")
    write(root / "lang" / "readme.MD", "readme-agent-2")
    write(root / "lang" / "ReadMe.markdown.md", "readme-agent-3")
    (root / "notes.txt").write_text("not a definition")
    write(root / ".hidden" / "h.md", "hidden")
    result = DefinitionLoader([Source(str(root), Level.DIRS)]).load()
    assert {n: s.category for n, s in result.specs.items()} == {"top": "", "py": "lang/python"}
    assert result.files_scanned == 2 and result.files_loaded == 2 and result.issues == []


@pytest.fixture
def all_log_levels() -> Iterator[None]:
    """The package logs at WARNING by default; let info lines through for capture_logs."""
    saved: dict[str, Any] = structlog.get_config()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG))
    try:
        yield
    finally:
        structlog.configure(**saved)


@pytest.mark.usefixtures("all_log_levels")
def test_higher_level_wins_and_the_shadowed_file_is_reported_and_logged(tmp_path: Path):
    project = tmp_path / "project"
    user = tmp_path / "user"
    winner = write(project / "rev.md", "reviewer", "project reviewer")
    loser = write(user / "reviewer.md", "reviewer", "user reviewer")
    write(user / "only-user.md", "only-user")
    loader = DefinitionLoader([Source(str(user), Level.USER), Source(str(project), Level.PROJECT)])
    with structlog.testing.capture_logs() as logs:
        result = loader.load()
    assert result.specs["reviewer"].description == "project reviewer"
    assert result.specs["reviewer"].level == Level.PROJECT
    assert result.specs["only-user"].level == Level.USER
    assert result.shadowed == [Shadowed("reviewer", str(winner), str(loser))]
    shadow_logs = [e for e in logs if e["event"] == "definition shadowed"]
    assert shadow_logs == [
        {
            "event": "definition shadowed",
            "agent": "reviewer",
            "winner": str(winner),
            "loser": str(loser),
            "rule": "project definitions win over user ones",
            "log_level": "warning",  # two files a person wrote: said without -v
        }
    ]
    assert result.issues == []
    # a reload (hot reload polls every second) does not say it again, but still reports it
    with structlog.testing.capture_logs() as logs:
        again, _ = loader.reload()
    assert again.shadowed == result.shadowed
    assert [e for e in logs if e["event"] == "definition shadowed"] == []


def test_duplicate_within_one_level_is_a_warning_naming_both_files(tmp_path: Path):
    root = tmp_path / "a"
    first = write(root / "a.md", "same", "first")
    second = write(root / "sub" / "b.md", "same", "second")
    result = DefinitionLoader([Source(str(root), Level.DIRS)]).load()
    assert result.specs["same"].description == "first"
    [issue] = result.issues
    assert issue.severity == "warning" and issue.file == str(second)
    assert str(first) in issue.reason and str(second) in issue.reason


@pytest.mark.usefixtures("all_log_levels")
def test_a_duplicate_is_logged_once_at_warning_and_a_builtin_override_at_info(tmp_path: Path):
    root = tmp_path / "a"
    first = write(root / "a.md", "same", "first")
    second = write(root / "sub" / "b.md", "same", "second")
    mine = write(tmp_path / "user" / "explore.md", "explore", "my explore")
    builtin = write(tmp_path / "builtin" / "explore.md", "explore", "the built-in")
    loader = DefinitionLoader(
        [
            Source(str(root), Level.DIRS),
            Source(str(tmp_path / "user"), Level.USER),
            Source(str(tmp_path / "builtin"), Level.BUILTIN),
        ]
    )
    with structlog.testing.capture_logs() as logs:
        result = loader.load()
    assert result.duplicates == [Shadowed("same", str(first), str(second))]
    said = {e["event"]: (e["log_level"], e["winner"], e["loser"]) for e in logs if "winner" in e}
    assert said["agent defined twice"] == ("warning", str(first), str(second))
    assert said["definition shadowed"] == ("info", str(mine), str(builtin))
    with structlog.testing.capture_logs() as logs:
        again, _ = loader.reload()
        write(root / "c.md", "other", "a change, so the reload scans again")
        changed, _ = loader.reload()
    assert again.duplicates == changed.duplicates == result.duplicates
    assert [e for e in logs if e["event"] in said] == []  # hot reload polls: said once


def test_code_registration_wins_over_files_and_can_be_removed(tmp_path: Path):
    root = tmp_path / "a"
    path = write(root / "x.md", "x", "from file")
    loader = DefinitionLoader([Source(str(root), Level.PROJECT)])
    loader.register(AgentSpec(name="x", description="from code", prompt="p", level=Level.DIRS))
    result = loader.load()
    assert result.specs["x"].description == "from code" and result.specs["x"].level == Level.CODE
    assert result.shadowed == [Shadowed("x", "<code>", str(path))]
    assert loader.unregister("x") and not loader.unregister("x")
    result, changes = loader.reload()
    assert result.specs["x"].description == "from file"
    assert changes == Changes(changed=("x",))


def test_register_refuses_an_invalid_spec_and_reports_warnings():
    loader = DefinitionLoader([], extra_tools=["custom"])
    with pytest.raises(DefinitionError, match="starts with '/', like a path"):
        loader.register(AgentSpec(name="/a", description="d"))
    loader.register(AgentSpec(name="ok", description="d", prompt="p", tools=("custom", "Nope")))
    result = loader.load()
    assert [i.reason for i in result.issues] == ["tools: unknown tool 'Nope'"]
    strict = DefinitionLoader([], strict=True)
    with pytest.raises(DefinitionError, match="unknown tool 'Nope'"):
        strict.register(AgentSpec(name="ok", description="d", prompt="p", tools=("Nope",)))


def test_registered_constructor_argument(tmp_path: Path):
    loader = DefinitionLoader([], registered=[AgentSpec(name="r", description="d", prompt="p")])
    assert list(loader.load().specs) == ["r"]


def test_missing_directory_is_a_warning_and_other_sources_still_load(tmp_path: Path):
    good = tmp_path / "good"
    write(good / "g.md", "g")
    afile = tmp_path / "file.md"
    afile.write_text("x")
    loader = DefinitionLoader(
        [
            Source(str(tmp_path / "missing"), Level.DIRS),
            Source(str(afile), Level.DIRS),
            Source(str(good), Level.DIRS),
        ]
    )
    result = loader.load()
    assert list(result.specs) == ["g"]
    assert [(i.severity, i.file, i.reason.split(";")[0]) for i in result.issues] == [
        ("warning", str(tmp_path / "missing"), "directory not found"),
        ("warning", str(afile), "not a directory"),
    ]


def test_the_same_directory_listed_twice_is_read_once_at_its_higher_level(tmp_path: Path):
    root = tmp_path / "a"
    write(root / "x.md", "x")
    loader = DefinitionLoader([Source(str(root), Level.USER), Source(str(root), Level.PROJECT)])
    result = loader.load()
    assert result.specs["x"].level == Level.PROJECT and result.issues == []
    assert result.files_scanned == 1 and result.shadowed == []


def test_extends_across_levels_and_strict_tools(tmp_path: Path):
    project = tmp_path / "p"
    user = tmp_path / "u"
    write(user / "base.md", "base", extra="tools: Read\n")
    write(project / "kid.md", "kid", extra="extends: base\n+tools: Frob\n")
    write(project / "lost.md", "lost", extra="extends: nobody\n")
    sources = [Source(str(project), Level.PROJECT), Source(str(user), Level.USER)]
    result = DefinitionLoader(sources).load()
    assert result.specs["kid"].tools == ("Read", "Frob")
    assert "lost" not in result.specs
    assert [(i.severity, i.name) for i in result.issues] == [("warning", "kid"), ("error", "lost")]
    strict = DefinitionLoader(sources, strict=True).load()
    assert sorted(strict.specs) == ["base"]
    assert [i.severity for i in strict.errors] == ["error", "error"]
    with pytest.raises(DefinitionError, match=r"unknown tool 'Frob'.*\(and 1 more errors\)"):
        strict.raise_for_errors()
    result.specs["kid"]  # the lenient result is unaffected by the strict one


def test_reload_reparses_only_changed_files(tmp_path: Path):
    root = tmp_path / "a"
    keep = write(root / "keep.md", "keep", "same")
    edit = write(root / "edit.md", "edit", "before")
    gone = write(root / "gone.md", "gone")
    loader = DefinitionLoader([Source(str(root), Level.DIRS)])
    first = loader.load()
    assert sorted(first.specs) == ["edit", "gone", "keep"]
    assert loader.files == sorted(str(p) for p in (keep, edit, gone))

    result, changes = loader.reload()
    assert changes == Changes() and not changes and result.specs == first.specs

    # Same size and same mtime: the cached parse is used (proof that unchanged files are not read).
    stamp = keep.stat()
    keep.write_text(keep.read_text().replace("same", "SAME"))
    os.utime(keep, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    write(root / "edit.md", "edit", "after, longer")
    gone.unlink()
    write(root / "new" / "new.md", "new")
    result, changes = loader.reload()
    assert changes == Changes(added=("new",), changed=("edit",), removed=("gone",))
    assert result.specs["keep"].description == "same"
    assert result.specs["edit"].description == "after, longer"
    assert str(gone) not in loader.files and str(root / "new" / "new.md") in loader.files

    # load() is a full scan: now the silent edit is seen.
    assert loader.load().specs["keep"].description == "SAME"


def test_an_unchanged_poll_returns_the_last_result_without_reading_a_file(tmp_path: Path):
    root = tmp_path / "a"
    write(root / "x.md", "x")
    loader = DefinitionLoader([Source(str(root), Level.DIRS)])
    first = loader.load()
    result, changes = loader.reload()
    assert result is first and not changes  # nothing recomputed: the same object


def test_the_unchanged_poll_still_sees_a_folder_appear_and_code_registrations(tmp_path: Path):
    later = tmp_path / "later"
    loader = DefinitionLoader([Source(str(later), Level.DIRS)])
    first = loader.load()
    assert [i.reason for i in first.issues] == [
        "directory not found; no definitions loaded from it"
    ]
    assert loader.reload()[1] == Changes()
    write(later / "x.md", "x")
    result, changes = loader.reload()
    assert changes == Changes(added=("x",)) and result.issues == []
    loader.register(AgentSpec(name="coded", description="in code"))
    assert loader.reload()[1] == Changes(added=("coded",))
    assert loader.unregister("coded")
    assert loader.reload()[1] == Changes(removed=("coded",))
    later.joinpath("x.md").unlink()
    later.rmdir()
    later.write_text("a file where the folder was")
    result, changes = loader.reload()
    assert changes == Changes(removed=("x",))
    assert [i.reason for i in result.issues] == ["not a directory; no definitions loaded from it"]


def test_reload_before_load_reports_everything_added(tmp_path: Path):
    root = tmp_path / "a"
    write(root / "x.md", "x")
    result, changes = DefinitionLoader([Source(str(root), Level.DIRS)]).reload()
    assert changes.added == ("x",) and list(result.specs) == ["x"]


def test_a_file_turning_bad_drops_its_definition_and_says_why(tmp_path: Path):
    root = tmp_path / "a"
    path = write(root / "x.md", "x")
    loader = DefinitionLoader([Source(str(root), Level.DIRS)])
    loader.load()
    path.write_text("---\nname: x\ndescription: d\ntier: 9\n---\nP\n")
    result, changes = loader.reload()
    assert changes.removed == ("x",)
    assert [(i.line, i.reason) for i in result.issues] == [(4, "tier must be 0, 1, 2 or 3, got 9")]


def test_symlink_loops_are_followed_once(tmp_path: Path):
    root = tmp_path / "a"
    write(root / "x.md", "x")
    (root / "loop").symlink_to(root, target_is_directory=True)
    result = DefinitionLoader([Source(str(root), Level.DIRS)]).load()
    assert list(result.specs) == ["x"] and result.files_scanned == 1
