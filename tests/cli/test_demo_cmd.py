"""`subagents demo` end to end: the real command in a subprocess, on the offline model, with a
fresh HOME (so its runs go to that home's default store)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import msgspec
import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    return h


def _env(home: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("ANTHROPIC_API_KEY", "XDG_STATE_HOME") and not k.startswith("SUBAGENTS_")
    }
    env["HOME"] = str(home)
    return env


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "subagents.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=_env(home),
        cwd=home,
    )


def _demo(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return _cli(home, "demo", *args)


def test_demo_shows_every_feature_it_promises(home: Path) -> None:
    proc = _demo(home, "--json")
    assert proc.returncode == 0, proc.stderr
    data = msgspec.json.decode(proc.stdout)
    runs = {r["agent"]: r for r in data["runs"]}
    assert data["outcome"]["status"] == "completed"
    # a parallel fan-out of (at least) three children of the lead
    lead = runs["lead"]
    children = [r for r in data["runs"] if r.get("parent_run_id") == lead["run_id"]]
    assert len(children) >= 3
    # a grandchild at depth 2
    assert runs["fact-checker"]["depth"] == 2
    # two siblings mailing each other with a reply
    sent = Counter(e["agent"] for e in data["events"] if e["kind"] == "mail_sent")
    assert sent["critic"] >= 1 and sent["writer"] >= 1
    assert "section 2 is ready" in runs["critic"]["outcome"]["result"]
    # a run queued under the concurrency limit
    assert any(e["kind"] == "queued" for e in data["events"])
    # one child over its timeout while the others finish
    assert runs["deep-diver"]["status"] == "timed_out"
    for name in ("researcher", "critic", "writer", "fact-checker"):
        assert runs[name]["status"] == "completed", name
    # a child restarted by the supervisor after its model call failed, then done
    restarts = [e for e in data["events"] if e["kind"] == "restarted"]
    assert [e["agent"] for e in restarts] == ["flaky"]
    assert runs["flaky"]["status"] == "completed" and runs["flaky"]["restarts"] == 1
    # a child stopped at its token budget
    assert runs["spender"]["status"] == "budget_exceeded"
    assert runs["spender"]["usage"]["input_tokens"] > 0
    # the parent combined what came back
    result = data["outcome"]["result"]
    assert "Survey complete" in result and "Draft written" in result
    assert "timed_out" in result


def test_demo_human_output_ends_with_result_and_a_line_per_run(home: Path) -> None:
    proc = _demo(home)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "\x1b[" not in out  # not a terminal: no ANSI codes
    assert "Result (completed):" in out
    runs_section = out.split("Runs:", 1)[1]
    agents = ("lead", "researcher", "fact-checker", "critic", "writer", "deep-diver", "flaky")
    for agent in (*agents, "spender"):
        assert agent in runs_section
    assert "queued (position" in out
    # why more children work at once than the limit: a waiting run lent its slot (session 32)
    assert "lead" in out and "parked: waits without its slot, lent to a queued run" in out
    assert "restart #1" in out
    assert "budget_exceeded" in out
    assert "lent its slot" not in proc.stderr  # expected: info, not a warning


def test_the_demo_is_recorded_in_the_default_store_and_its_ids_work_afterwards(
    home: Path,
) -> None:
    proc = _demo(home)
    assert proc.returncode == 0, proc.stderr
    store = home / ".local" / "state" / "subagents" / "runs.sqlite3"
    assert f"Recorded in {store}. Try:" in proc.stdout
    tries = proc.stdout.split("Try:", 1)[1].split()
    tree_cmd = tries[tries.index("tree") + 1]
    log_cmd = tries[tries.index("log") + 1]
    listed = msgspec.json.decode(_cli(home, "ps", "--all", "--json").stdout)
    agents = {row["agent"]: row["run_id"] for row in listed}
    assert set(agents) == {
        "lead", "researcher", "fact-checker", "critic", "writer", "deep-diver", "flaky", "spender"
    }  # fmt: skip
    assert tree_cmd == agents["lead"] and log_cmd == agents["researcher"]
    tree = _cli(home, "tree", tree_cmd)
    assert tree.returncode == 0, tree.stderr
    assert "fact-checker" in tree.stdout and "timed_out" in tree.stdout
    log = _cli(home, "log", log_cmd)
    assert log.returncode == 0 and "Survey complete" in log.stdout


def test_run_lead_on_the_demo_folder_gives_the_demo_s_answer(home: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    demo = msgspec.json.decode(_demo(home, "--json").stdout)
    proc = _cli(
        home,
        "run",
        "lead",
        demo["runs"][0]["task"],
        "--agents",
        str(REPO / "agents" / "demo"),
        "--workspace",  # not the home directory: the default store is inside it (refused)
        str(work),
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    run = msgspec.json.decode(proc.stdout)
    assert "{" not in run["outcome"]["result"]  # every placeholder filled: six children ran
    assert run["outcome"]["result"] == demo["outcome"]["result"]
    assert sorted(r["agent"] for r in run["runs"]) == sorted(r["agent"] for r in demo["runs"])


def test_the_demo_prints_a_team_folder_whose_name_looks_like_markup(
    home: Path, tmp_path: Path
) -> None:
    """The folder's path is printed as text: read as rich markup, a `[/bold]` in it failed
    the demo (MarkupError) before it started, and `[conceal]` would hide the rest."""
    import shutil
    from importlib.resources import as_file, files

    folder = tmp_path / "team [/bold] [conceal]x"
    with as_file(files("subagents") / "demo_team") as shipped:
        shutil.copytree(shipped, folder)
    proc = _demo(home, "--agents", str(folder))
    assert proc.returncode == 0, proc.stderr
    assert f"team from {folder}, offline model" in proc.stdout, proc.stdout
