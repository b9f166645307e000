"""Shell completion: the code `subagents completion SHELL` prints registers with the shell,
and the command answers a completion request (argcomplete's protocol, as the shell code
calls it at each TAB) with sub-commands, options, runs from the store and agents."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from clikit import Cli


def _complete(cli: Cli, line: str, tmp_path: Path) -> list[str]:
    """The candidates for the end of ``line``, as the shell's function asks for them."""
    out = tmp_path / "completions.txt"
    env = dict(
        cli.env,
        _ARGCOMPLETE="1",
        _ARGCOMPLETE_IFS="\n",
        _ARGCOMPLETE_STDOUT_FILENAME=str(out),
        COMP_LINE=line,
        COMP_POINT=str(len(line)),
    )
    proc = subprocess.run(
        [sys.executable, "-m", "subagents.cli.main"], env=env, capture_output=True, text=True,
        timeout=60, cwd=cli.root,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return sorted(w.strip() for w in out.read_text().split("\n") if w.strip())


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path)


def test_sub_commands_and_options_complete(cli: Cli, tmp_path: Path) -> None:
    assert _complete(cli, "subagents pr", tmp_path) == ["prune"]
    assert {"ps", "prune"} <= set(_complete(cli, "subagents p", tmp_path))
    assert _complete(cli, "subagents ps --wa", tmp_path) == ["--watch"]
    assert _complete(cli, "subagents completion z", tmp_path) == ["zsh"]


def test_runs_complete_from_the_store_by_the_ids_the_views_show(cli: Cli, tmp_path: Path) -> None:
    words = _complete(cli, "subagents info ", tmp_path)
    assert [w for w in words if not w.startswith("-")] == []  # no store yet: no run, no error
    done = cli("run", "quick", "x", "--agents", str(cli.agents), "--json")
    assert done.returncode == 0, done.stderr
    run_id = cli.json("ps", "--all")[0]["run_id"]
    words = _complete(cli, "subagents info ", tmp_path)
    assert [w for w in words if not w.startswith("-")] == [run_id[-8:]]
    assert _complete(cli, f"subagents log {run_id[-8:-4]}", tmp_path) == [run_id[-8:]]
    assert _complete(cli, f"subagents log {run_id[:10]}", tmp_path) == [run_id]


def test_agents_complete_from_the_definitions(cli: Cli, tmp_path: Path) -> None:
    found = _complete(cli, f"subagents run --agents {cli.agents} qu", tmp_path)
    assert found == ["quick"]
    assert "explore" in _complete(cli, "subagents run ", tmp_path)  # a built-in agent


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_the_bash_code_registers_the_completion(cli: Cli) -> None:
    code = cli("completion", "bash")
    assert code.returncode == 0, code.stderr
    registered = subprocess.run(
        ["bash", "-c", code.stdout + "\ncomplete -p subagents"],
        capture_output=True, text=True, timeout=60, env=dict(os.environ),
    )  # fmt: skip
    assert registered.returncode == 0, registered.stderr
    assert "subagents" in registered.stdout and "-F" in registered.stdout
    for shell in ("zsh", "fish"):
        printed = cli("completion", shell)
        assert printed.returncode == 0 and "subagents" in printed.stdout
    unknown = cli("completion", env={"SHELL": "/bin/tcsh"})
    assert unknown.returncode == 2 and "name the shell" in unknown.stderr


def test_a_run_completes_from_the_latest_runs_without_reading_the_whole_store(
    cli: Cli, tmp_path: Path
) -> None:
    """A TAB reads the runs last active, not every run of the store (a store of 100,000
    runs answered in seconds): a damaged record of an old run, which a TAB has no reason to
    read, leaves the newest runs completing."""
    import sqlite3

    from subagents.cli.completion import RECENT_RUNS
    from subagents.messages import Event, EventKind, RunRecord, RunStatus
    from subagents.store.base import StoreError
    from subagents.store.sqlite import SQLiteStore

    cli.state.parent.mkdir(parents=True, exist_ok=True)
    ids = [f"r{n:012x}{n:010x}" for n in range(1, RECENT_RUNS + 11)]
    with SQLiteStore(cli.state) as store, store.batch():
        for n, run_id in enumerate(ids):
            run = RunRecord(
                run_id=run_id, agent="quick", task="t", root_run_id=run_id,
                status=RunStatus.COMPLETED, created_at=1000.0 + n, ended_at=1000.5 + n,
            )  # fmt: skip
            store.save_run(run)
            store.append_event(
                Event(kind=EventKind.COMPLETED, run_id=run_id, agent="quick", root_run_id=run_id)
            )
    with sqlite3.connect(cli.state) as db:  # the oldest run's record, damaged on disk
        db.execute("UPDATE runs SET record = 'not json' WHERE run_id = ?", (ids[0],))
    with SQLiteStore(cli.state) as store, pytest.raises(StoreError):
        store.list_runs(include_archived=True)  # reading every run fails on it
    words = [w for w in _complete(cli, "subagents info ", tmp_path) if not w.startswith("-")]
    assert words == sorted(i[-8:] for i in ids[-RECENT_RUNS:])  # the latest, all of them
