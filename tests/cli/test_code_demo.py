"""`subagents demo --team code` end to end: the real command in a subprocess, on the offline
model, with the real tools in a real git repository the demo makes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec


def _demo(home: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The command, with a fresh HOME (so its runs go to that home's default store)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("ANTHROPIC_API_KEY", "XDG_STATE_HOME") and not k.startswith("SUBAGENTS_")
    }
    env["HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-m", "subagents.cli.main", "demo", "--team", "code", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=cwd,
    )


def _calls(data: dict[str, Any], agent: str) -> list[str]:
    return [e["tool"] for e in data["events"] if e["kind"] == "tool_call" and e["agent"] == agent]


def test_the_code_team_reviews_and_fixes_a_repository(tmp_path: Path) -> None:
    proc = _demo(tmp_path, "--json", "--keep")
    assert proc.returncode == 0, proc.stderr
    data = msgspec.json.decode(proc.stdout)
    repo = Path(data["repository"])
    try:
        runs = {r["agent"]: r for r in data["runs"]}
        assert data["outcome"]["status"] == "completed"
        assert set(runs) == {"lead", "scout", "tester", "planner", "fixer", "reviewer"}
        assert all(r["status"] == "completed" for r in runs.values()), runs
        # scout and tester in parallel: both started before either ended
        scout, tester = runs["scout"], runs["tester"]
        assert scout["started_at"] < tester["ended_at"] and tester["started_at"] < scout["ended_at"]
        # grep, read, edit, run the tests, read the diff: the real tools did it
        assert _calls(data, "scout") == ["Glob", "Grep", "Read"]
        assert _calls(data, "tester") == ["Bash"]
        assert _calls(data, "fixer") == ["Read", "Edit", "Bash"]
        assert _calls(data, "reviewer") == ["Bash", "Bash"]
        assert "stats.py:9:def median(values):" in scout["outcome"]["result"]
        assert "FAIL: test_median_even" in tester["outcome"]["result"]
        assert "Ran 3 tests" in runs["fixer"]["outcome"]["result"]
        assert "OK" in runs["fixer"]["outcome"]["result"]
        review = runs["reviewer"]["outcome"]["result"]
        assert "+        return (ordered[middle - 1] + ordered[middle]) / 2" in review
        # the repository really changed, and its tests pass now
        assert data["tests_pass"] is True
        assert Path(data["store"]).is_relative_to(tmp_path)  # the fresh HOME's store
        assert "return (ordered[middle - 1] + ordered[middle]) / 2" in data["diff"]
        assert "(ordered[middle - 1] + ordered[middle]) / 2" in (repo / "stats.py").read_text()
        check = subprocess.run(["sh", "test.sh"], cwd=repo, capture_output=True, text=True)
        assert check.returncode == 0, check.stderr
    finally:
        subprocess.run(["rm", "-rf", str(repo.parent)], check=False)


def test_the_code_demo_prints_the_tree_the_diff_and_cleans_up(tmp_path: Path) -> None:
    proc = _demo(tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for line in ("scout", "Grep 'def median'", "Edit stats.py", "Bash sh test.sh", "git diff"):
        assert line in out, line
    assert "The tests now pass (sh test.sh)." in out
    where = out.split("The repository was in ", 1)[1].split(",", 1)[0]
    assert where.endswith("stats") and not Path(where).exists()  # removed without --keep
    # recorded like the default demo's runs: the commands to look at them again
    assert "subagents tree " in out and "subagents log " in out


def test_the_code_demo_prints_a_team_folder_whose_name_looks_like_markup(tmp_path: Path) -> None:
    """The folder's path is printed as text: read as rich markup, a `[/bold]` in it failed
    the demo (MarkupError) before the team started."""
    import shutil
    from importlib.resources import as_file, files

    folder = tmp_path / "team [/bold] [conceal]x"
    with as_file(files("subagents") / "code_team") as shipped:
        shutil.copytree(shipped, folder)
    proc = _demo(tmp_path, "--agents", str(folder))
    assert proc.returncode == 0, proc.stderr
    assert f"team from {folder}, offline model" in proc.stdout, proc.stdout
