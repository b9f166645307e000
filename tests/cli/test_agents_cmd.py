"""`subagents agents`, run as the real command against real definition files (in the test's
process, as ``clikit.run_command`` runs it; on a terminal in a subprocess of its own)."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from clikit import run_command

from corpora import SYNTHETIC, require_public_corpus

ANSI = "\x1b["
KEYS = {"name", "description", "tools", "model", "source", "level"}


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip())
    return path


def agent(name: str, description: str, extra: str = "", body: str = "You help.") -> str:
    return f"---\nname: {name}\ndescription: {description}\n{extra}---\n{body}\n"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """An empty home and working directory, so the user's own agents never leak in."""
    h = tmp_path / "home"
    h.mkdir()
    return h


def env_for(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"NO_COLOR", "FORCE_COLOR"}}
    env.update(HOME=str(home), COLUMNS="200", **extra)
    return env


def cli(
    *args: str, home: Path, cwd: Path | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    return run_command(args, env=env_for(home, **env), cwd=cwd or home, timeout=60)


@pytest.fixture
def defs(tmp_path: Path) -> Path:
    d = tmp_path / "defs"
    write(
        d / "reviewer.md",
        agent(
            "code-reviewer",
            "Reviews code for bugs. Use after every change.",
            "tools: Read, Grep\nmodel: sonnet\n",
        ),
    )
    write(d / "writing" / "docs.md", agent("doc-writer", "Writes documentation"))
    write(d / "README.md", "# not an agent\n")
    return d


def test_json_lists_every_definition_with_the_documented_keys(defs: Path, home: Path) -> None:
    r = cli("agents", "--dir", str(defs), "--json", home=home)
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert isinstance(rows, list)
    assert all(set(row) == KEYS for row in rows)
    by_name = {row["name"]: row for row in rows}
    assert by_name["code-reviewer"] == {
        "name": "code-reviewer",
        "description": "Reviews code for bugs. Use after every change.",
        "tools": ["Read", "Grep"],
        "model": "sonnet",
        "source": str(defs / "reviewer.md"),
        "level": "dirs",
    }
    assert by_name["doc-writer"]["tools"] is None and by_name["doc-writer"]["model"] is None
    # the built-in defaults load too
    assert {"explore", "code", "plan"} <= set(by_name)
    assert by_name["explore"]["level"] == "builtin"
    assert ANSI not in r.stdout


def test_plain_table_when_stdout_is_not_a_terminal(defs: Path, home: Path) -> None:
    long = "A very long description " * 10
    write(defs / "long.md", agent("long-one", long.strip()))
    r = cli("agents", "--dir", str(defs), home=home)
    assert r.returncode == 0, r.stderr
    assert ANSI not in r.stdout and ANSI not in r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["NAME", "DESCRIPTION", "TOOLS", "MODEL", "SOURCE", "LEVEL"]
    row = next(line for line in lines if line.startswith("code-reviewer "))
    assert "Read, Grep" in row and "sonnet" in row and row.endswith("dirs")
    long_row = next(line for line in lines if line.startswith("long-one "))
    assert "…" in long_row and long not in long_row
    assert all(line == line.rstrip() for line in lines)


def run_in_terminal(args: list[str], env: dict[str, str], cwd: Path) -> str:
    """Run with stdout on a real pseudo-terminal and return what it printed."""
    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "subagents.cli.main", *args],
            stdout=follower,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=env,
        )
        os.close(follower)
        chunks = []
        while True:
            try:
                data = os.read(leader, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        assert proc.wait(timeout=60) == 0
        return b"".join(chunks).decode()
    finally:
        os.close(leader)


def test_rich_table_on_a_terminal_and_no_ansi_with_no_color(defs: Path, home: Path) -> None:
    args = ["agents", "--dir", str(defs)]
    coloured = run_in_terminal(args, env_for(home, TERM="xterm-256color"), home)
    assert ANSI in coloured and "code-reviewer" in coloured
    plain = run_in_terminal(args, env_for(home, TERM="xterm-256color", NO_COLOR="1"), home)
    assert ANSI not in plain and "code-reviewer" in plain


def test_a_bad_file_is_a_warning_on_stderr_and_the_rest_loads(defs: Path, home: Path) -> None:
    bad = write(defs / "broken.md", "---\nname: broken\n---\nno description\n")
    r = cli("agents", "--dir", str(defs), "--json", home=home)
    assert r.returncode == 0
    assert str(bad) in r.stderr and "description" in r.stderr
    names = {row["name"] for row in json.loads(r.stdout)}
    assert {"code-reviewer", "doc-writer"} <= names and "broken" not in names


def test_validate_lists_every_problem_and_fails(defs: Path, home: Path) -> None:
    bad = write(defs / "broken.md", "---\nname: broken\n---\nno description\n")
    worse = write(defs / "worse.md", "---\nname: [unclosed\ndescription: x\n---\nbody\n")
    r = cli("agents", "--dir", str(defs), "--validate", home=home)
    assert r.returncode == 1
    assert str(bad) in r.stdout and str(worse) in r.stdout
    assert any(
        line.startswith(f"{worse}:") and line[len(str(worse)) + 1].isdigit()
        for line in r.stdout.splitlines()
    ), r.stdout  # file:line: reason
    assert "problem(s)" in r.stderr

    j = cli("agents", "--dir", str(defs), "--validate", "--json", home=home)
    assert j.returncode == 1
    problems = json.loads(j.stdout)
    assert {p["file"] for p in problems} >= {str(bad), str(worse)}


def test_validate_passes_on_clean_definitions(defs: Path, home: Path) -> None:
    r = cli("agents", "--dir", str(defs), "--validate", home=home)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("ok: ")


def test_strict_turns_unknown_tools_into_errors(defs: Path, home: Path) -> None:
    write(defs / "odd.md", agent("odd-tools", "Uses a tool nobody has", "tools: Read, Teleport\n"))
    lenient = cli("agents", "--dir", str(defs), "--json", home=home)
    assert lenient.returncode == 0
    assert "Teleport" in lenient.stderr
    strict = cli("agents", "--dir", str(defs), "--validate", "--strict", home=home)
    assert strict.returncode == 1
    line = next(line for line in strict.stdout.splitlines() if "Teleport" in line)
    assert "error" in line and "odd.md" in line


def test_unknown_directory_is_a_usage_error(home: Path, tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    r = cli("agents", "--dir", str(missing), home=home)
    assert r.returncode == 2
    assert r.stderr.strip() == f"subagents agents: error: directory not found: {missing}"
    assert r.stdout == ""
    a_file = write(tmp_path / "file.md", "x")
    r = cli("agents", "--dir", str(a_file), home=home)
    assert r.returncode == 2 and "not a directory" in r.stderr


def test_project_definitions_shadow_named_directories(
    defs: Path, home: Path, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    write(project / ".claude" / "agents" / "rev.md", agent("code-reviewer", "Project reviewer"))
    (project / "src").mkdir()
    r = cli("agents", "--dir", str(defs), "--json", home=home, cwd=project / "src")
    assert r.returncode == 0, r.stderr
    row = next(x for x in json.loads(r.stdout) if x["name"] == "code-reviewer")
    assert row["level"] == "project" and row["description"] == "Project reviewer"


def test_user_definitions_load_from_home(home: Path) -> None:
    write(home / ".claude" / "agents" / "mine.md", agent("my-helper", "Mine"))
    r = cli("agents", "--json", home=home)
    row = next(x for x in json.loads(r.stdout) if x["name"] == "my-helper")
    assert row["level"] == "user"


def test_the_synthetic_messy_corpus(home: Path) -> None:
    r = cli("agents", "--dir", str(SYNTHETIC), "--json", home=home)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = json.loads(r.stdout)
    listed = {x["name"] for x in rows if x["source"] and x["source"].startswith(str(SYNTHETIC))}
    # every file but the broken one; the duplicate 'helper' once
    assert len(listed) == 20
    assert {"Python Testing Expert", "crlf-agent", "bom-agent", "tabbed-agent"} <= listed
    assert "lonely" not in listed


def test_the_public_corpus(home: Path) -> None:
    corpus = require_public_corpus()
    r = cli("agents", "--dir", str(corpus), "--json", home=home)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = json.loads(r.stdout)
    from_corpus = [x for x in rows if x["source"] and x["source"].startswith(str(corpus))]
    print(f"corpus: {len(from_corpus)} definitions listed")
    assert len(from_corpus) >= 300
    assert all(x["description"] for x in from_corpus)
    assert all(x["level"] == "dirs" for x in from_corpus)


def test_help_lists_the_sub_commands(home: Path) -> None:
    r = cli("--help", home=home)
    assert r.returncode == 0 and "agents" in r.stdout
    none = cli(home=home)
    assert none.returncode == 2 and "COMMAND" in none.stderr


def test_validate_reports_bad_policy_fields_with_their_lines(tmp_path: Path, home: Path) -> None:
    d = tmp_path / "policies"
    write(
        d / "bad.md",
        agent(
            "retrier",
            "Retries.",
            "onFailure: retyr\nmaxRestarts: -1\ncostBudget: .nan\nrestartPeriod: .inf\n",
        ),
    )
    write(d / "good.md", agent("steady", "Steady.", "onFailure: fail-parent\nmaxRetries: 2\n"))
    r = cli("agents", "--dir", str(d), "--validate", home=home)
    assert r.returncode == 1
    bad = str(d / "bad.md")
    assert r.stdout.splitlines() == [
        f"{bad}:4: error: retrier: onFailure must be one of report, retry, fail_parent, got"
        " 'retyr' (did you mean 'retry'?)",
        f"{bad}:5: error: retrier: maxRestarts must be a whole number >= 0, got -1",
        f"{bad}:6: error: retrier: costBudget must be a finite number > 0, got nan",
        f"{bad}:7: error: retrier: restartPeriod must be a finite number > 0, got inf",
    ]
    r = cli("agents", "--dir", str(d), "--json", home=home)
    assert [row["name"] for row in json.loads(r.stdout) if row["level"] == "dirs"] == ["steady"]


def test_tool_names_are_checked_against_the_runtimes_tools(tmp_path: Path, home: Path) -> None:
    d = tmp_path / "tools"
    write(d / "a.md", agent("fanner", "Fans out.", "tools: fan_out, Read, mcp__git__log\n"))
    write(d / "b.md", agent("odd", "Odd tools.", "tools: Frobnicate, spawn_subagent\n"))
    r = cli("agents", "--dir", str(d), "--validate", home=home)
    assert r.returncode == 0  # warnings alone
    assert r.stdout.splitlines() == [
        f"{d / 'b.md'}:4: warning: odd: tools: unknown tool 'Frobnicate'"
    ]  # the runtime's own fan_out, Claude Code's Read and MCP tools are known
    strict = cli("agents", "--dir", str(d), "--validate", "--strict", home=home)
    assert strict.returncode == 1
    assert strict.stdout.splitlines() == [
        f"{d / 'b.md'}:4: error: odd: tools: unknown tool 'Frobnicate'"
    ]


def test_validate_exits_0_on_warnings_alone_and_1_with_strict(defs: Path, home: Path) -> None:
    write(defs / "spaced.md", agent("Spaced Name", "Loads with a name warning"))
    r = cli("agents", "--dir", str(defs), "--validate", home=home)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "warning" in r.stdout and "Spaced Name" in r.stdout
    assert "0 error(s), 1 warning(s)" in r.stderr
    strict = cli("agents", "--dir", str(defs), "--validate", "--strict", home=home)
    assert strict.returncode == 1


def test_definition_text_never_reaches_the_terminal_raw(defs: Path, home: Path) -> None:
    write(defs / "loud.md", agent("loud", "Rings \x07 and paints \x1b[31mred\x1b[0m"))
    r = cli("agents", "--dir", str(defs), home=home)
    assert r.returncode == 0
    assert "\x1b" not in r.stdout and "\x07" not in r.stdout
    assert "\\x1b[31mred" in r.stdout and "\\x07" in r.stdout
    j = cli("agents", "--dir", str(defs), "--json", home=home)
    row = next(x for x in json.loads(j.stdout) if x["name"] == "loud")
    assert row["description"] == "Rings \x07 and paints \x1b[31mred\x1b[0m"  # JSON stays exact
