"""The Catalog over the real DefinitionLoader and real files (still no threads)."""

from __future__ import annotations

from pathlib import Path

import pytest
from structlog.testing import LogCapture

from subagents.definitions import DefinitionLoader, default_sources
from subagents.definitions.catalog import Catalog, Changes
from subagents.definitions.spec import AgentSpec, Level


def md(name: str, description: str, extra: str = "") -> str:
    return f"---\nname: {name}\ndescription: {description}\n{extra}---\nYou are {name}.\n"


def make_loader(tmp_path: Path, *dirs: Path) -> DefinitionLoader:
    cwd = tmp_path / "cwd"
    cwd.mkdir(exist_ok=True)
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return DefinitionLoader(default_sources(cwd=cwd, dirs=dirs, home=home, include_builtin=False))


@pytest.fixture
def logs(every_log: LogCapture) -> LogCapture:
    """Every log line at every level (the package's default filters below WARNING)."""
    return every_log


@pytest.fixture
def defs(tmp_path: Path) -> Path:
    d = tmp_path / "defs"
    (d / "team").mkdir(parents=True)
    (d / "a.md").write_text(md("alpha", "First agent"))
    (d / "team" / "b.md").write_text(md("beta", "Second agent", "type: reviewer\n"))
    return d


def test_loads_files_with_category_and_level(tmp_path: Path, defs: Path) -> None:
    catalog = Catalog(make_loader(tmp_path, defs))
    assert catalog.names() == ("alpha", "beta")
    beta = catalog.get("beta")
    assert beta.category == "team" and beta.level == Level.DIRS
    assert beta.source is not None and beta.source.endswith("b.md")
    stats = catalog.stats()
    assert stats.total == 2 and stats.files_loaded == 2 and stats.files_scanned >= 2
    assert stats.by_category == {"": 1, "team": 1} and stats.by_type == {"reviewer": 1}


def test_reload_reports_added_changed_removed(tmp_path: Path, defs: Path) -> None:
    catalog = Catalog(make_loader(tmp_path, defs))
    heard: list[Changes] = []
    catalog.subscribe(heard.append)
    assert catalog.reload() == Changes()  # nothing changed on disk
    (defs / "c.md").write_text(md("gamma", "Third"))
    (defs / "team" / "b.md").write_text(md("beta", "Second agent, now longer", "type: reviewer\n"))
    (defs / "a.md").unlink()
    changes = catalog.reload()
    assert changes == Changes(added=("gamma",), changed=("beta",), removed=("alpha",))
    assert heard == [changes]
    assert catalog.get("beta").description == "Second agent, now longer"


def test_a_bad_file_is_an_issue_and_loses_nothing_else(tmp_path: Path, defs: Path) -> None:
    catalog = Catalog(make_loader(tmp_path, defs))
    (defs / "bad.md").write_text("---\nname: bad\n---\nno description\n")
    catalog.reload()
    assert catalog.names() == ("alpha", "beta")
    assert catalog.stats().issues >= 1
    assert any("bad.md" in str(i.file) for i in catalog.issues())


def test_registered_specs_win_over_files_and_unregister_reveals_them(
    tmp_path: Path, defs: Path
) -> None:
    catalog = Catalog(make_loader(tmp_path, defs))
    changes = catalog.register(AgentSpec(name="alpha", description="In code", prompt="p"))
    assert changes == Changes(changed=("alpha",))
    assert catalog.get("alpha").level == Level.CODE
    assert catalog.stats().shadowed == 1
    assert catalog.unregister("alpha")
    assert catalog.get("alpha").level == Level.DIRS
    assert not catalog.unregister("beta")  # a file definition is not unregistered


def test_specs_given_with_a_loader_are_registered(tmp_path: Path, defs: Path) -> None:
    catalog = Catalog(
        make_loader(tmp_path, defs), specs=[AgentSpec(name="coded", description="d", prompt="p")]
    )
    assert catalog.names() == ("alpha", "beta", "coded")
    assert catalog.get("coded").level == Level.CODE


def test_reload_logs_counts_and_is_quiet_when_nothing_changed(
    tmp_path: Path, defs: Path, logs: LogCapture
) -> None:
    catalog = Catalog(make_loader(tmp_path, defs))
    catalog.reload()
    [quiet] = [e for e in logs.entries if e["event"] == "registry reloaded"]
    assert quiet["log_level"] == "debug"
    logs.entries.clear()
    (defs / "c.md").write_text(md("gamma", "Third"))
    catalog.reload()
    [line] = [e for e in logs.entries if e["event"] == "registry reloaded"]
    assert line["log_level"] == "info"
    assert (line["added"], line["changed"], line["removed"], line["total"]) == (1, 0, 0, 3)


def test_a_shadowed_definition_is_logged_once(logs: LogCapture) -> None:
    catalog = Catalog.from_specs(
        [
            AgentSpec(name="x", description="builtin", level=Level.BUILTIN, source="/b/x.md"),
            AgentSpec(name="x", description="user", level=Level.USER, source="/u/x.md"),
        ]
    )
    catalog.register(AgentSpec(name="y", description="d", prompt="p"))
    shadowed = [e for e in logs.entries if e["event"] == "definition shadowed"]
    assert shadowed == [
        {
            "event": "definition shadowed",
            "log_level": "info",
            "name": "x",
            "winner": "/u/x.md",
            "loser": "/b/x.md",
        }
    ]
    assert catalog.get("x").description == "user"
