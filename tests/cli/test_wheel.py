"""The wheel carries what the command needs: `subagents demo` runs from a wheel install.

The wheel is built offline from a copy of the checkout (no build isolation: setuptools and
wheel come with the test extras), installed into a folder of its own, and run from a
directory with nothing beside it, with that folder first on the path, so the package that
answers is the wheel's, not the editable checkout's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

REPO = Path(__file__).resolve().parents[2]

# a wheel built, installed and its demo run: three interpreters and a build, 24-34 s in load
# runs here; on a machine loaded further, that alone passed the suite's 120 s hang guard
pytestmark = pytest.mark.timeout(360)


def _copy_checkout(dest: Path) -> Path:
    ignore = shutil.ignore_patterns(
        ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache"
    )
    shutil.copytree(REPO, dest, symlinks=True, ignore=ignore)
    return dest


def _pip(*args: str, cwd: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pip", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def test_the_demo_runs_from_a_wheel_install(tmp_path: Path) -> None:
    source = _copy_checkout(tmp_path / "source")
    wheels = tmp_path / "wheels"
    _pip(
        "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q", "-w", str(wheels), ".",
        cwd=source,
    )  # fmt: skip
    [wheel] = list(wheels.glob("subagents-*.whl"))
    site = tmp_path / "site"
    _pip(
        "install", "--no-deps", "--no-index", "-q", "--target", str(site), str(wheel), cwd=tmp_path
    )
    assert (site / "subagents" / "demo_team" / "lead.md").is_file()
    static = site / "subagents" / "console" / "static"  # `subagents serve`'s page
    pages = ("index.html", "run.html", "console.css")
    for name in (*pages, "common.js", "tree.js", "run.js", "approvals.js"):
        assert (static / name).is_file(), name

    elsewhere = tmp_path / "elsewhere"  # no agents/ folder here or above
    home = elsewhere / "home"
    home.mkdir(parents=True)
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("ANTHROPIC_API_KEY", "XDG_STATE_HOME") and not k.startswith("SUBAGENTS_")
    }
    env.update(HOME=str(home), PYTHONPATH=str(site))
    where = subprocess.run(
        [sys.executable, "-c", "import subagents; print(subagents.__file__)"],
        capture_output=True,
        text=True,
        env=env,
        cwd=elsewhere,
        timeout=60,
    )
    assert where.stdout.strip().startswith(str(site)), where.stdout + where.stderr
    proc = subprocess.run(
        [sys.executable, "-m", "subagents.cli.main", "demo", "--json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=elsewhere,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    data = msgspec.json.decode(proc.stdout)
    assert data["outcome"]["status"] == "completed"
    assert len(data["runs"]) == 8
    assert data["store"] == str(home / ".local" / "state" / "subagents" / "runs.sqlite3")
    # the code team is package data too: its demo runs from the wheel (it extends the
    # built-in agents, which are package data as well)
    assert (site / "subagents" / "code_team" / "fixer.md").is_file()
    code = subprocess.run(
        [sys.executable, "-m", "subagents.cli.main", "demo", "--team", "code", "--json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=elsewhere,
        timeout=120,
    )
    assert code.returncode == 0, code.stderr
    coded = msgspec.json.decode(code.stdout)
    assert coded["outcome"]["status"] == "completed" and coded["tests_pass"] is True
