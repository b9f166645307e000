"""Two definitions of one name: `run`, `demo` and `agents` say so at WARNING level, without
-v, naming both files and the one used. `subagents run lead ... --agents ./agents` in the
repository used to run the code team's lead instead of the demo team's without a word, and the
example in docs/cli.md said it would run the other."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import msgspec
import pytest
from clikit import Cli

from subagents.definitions.discovery import DefinitionLoader, Source
from subagents.definitions.spec import Level

REPO = Path(__file__).resolve().parents[2]

OTHER_QUICK = """---
name: quick
description: Another quick.
script:
  - text: "the other quick"
---
You answer too.
"""


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path)


def _warnings(stderr: str, event: str) -> list[str]:
    return [line for line in stderr.splitlines() if "warning" in line and event in line]


def test_run_warns_of_a_name_defined_twice_in_its_folders(cli: Cli) -> None:
    other = cli.root / "other"
    other.mkdir()
    (other / "quick.md").write_text(OTHER_QUICK)
    proc = cli("run", "quick", "hi", "--agents", str(cli.agents), "--agents", str(other), "--json")
    assert proc.returncode == 0, proc.stderr
    [line] = _warnings(proc.stderr, "agent defined twice")
    assert f"winner={cli.agents / 'quick.md'}" in line and f"loser={other / 'quick.md'}" in line
    result = msgspec.json.decode(proc.stdout)["outcome"]["result"]
    assert result == "quick answer to hi"  # the one the warning says wins


def test_run_warns_when_a_project_definition_hides_an_agents_folders(cli: Cli) -> None:
    project = cli.root / ".claude" / "agents"  # the command runs in cli.root
    project.mkdir(parents=True)
    (project / "quick.md").write_text(OTHER_QUICK)
    proc = cli("run", "quick", "hi", "--agents", str(cli.agents), "--json")
    assert proc.returncode == 0, proc.stderr
    [line] = _warnings(proc.stderr, "definition shadowed")
    assert f"winner={project / 'quick.md'}" in line
    assert f"loser={cli.agents / 'quick.md'}" in line
    assert "project definitions win over dirs ones" in line
    assert msgspec.json.decode(proc.stdout)["outcome"]["result"] == "the other quick"


def test_agents_says_it_once_and_demo_says_it(cli: Cli) -> None:
    team = cli.root / "demo-team"
    shutil.copytree(REPO / "src" / "subagents" / "demo_team", team)
    second = team / "more" / "lead.md"
    second.parent.mkdir()
    second.write_text((team / "lead.md").read_text())
    listed = cli("agents", "--dir", str(team))
    assert listed.returncode == 0, listed.stderr
    assert len([line for line in listed.stderr.splitlines() if "lead" in line]) == 1
    [line] = _warnings(listed.stderr, "agent defined twice")
    assert f"winner={team / 'lead.md'}" in line and f"loser={second}" in line
    demo = cli("demo", "--agents", str(team), "--json", "--state", str(cli.state))
    assert demo.returncode == 0, demo.stderr
    [line] = _warnings(demo.stderr, "agent defined twice")
    assert f"winner={team / 'lead.md'}" in line and f"loser={second}" in line


def test_the_run_example_of_docs_cli_runs_the_agent_it_says() -> None:
    """The first `subagents run` of docs/cli.md, read as written: its --agents folder
    defines its agent once, and that is the demo team's (whose output the page shows)."""
    text = (REPO / "docs" / "cli.md").read_text()
    command = re.search(r"^\$ subagents run (\S+) \"[^\"]*\" --agents (\S+)$", text, re.M)
    assert command is not None
    agent, folder = command.groups()
    loaded = DefinitionLoader([Source(str(REPO / folder), Level.DIRS)]).load()
    assert [d.name for d in loaded.duplicates] == []
    source = loaded.specs[agent].source
    assert source is not None
    assert Path(source).resolve() == (REPO / "agents" / "demo" / f"{agent}.md").resolve()
