"""The README's examples run as written."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_quickstart_runs_and_prints_what_the_readme_says() -> None:
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "quickstart.py")],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "completed - A: done with part A; B: done with part B"
    assert re.fullmatch(r"\d+ tokens in the tree", lines[1])
    assert int(lines[1].split()[0]) > 0
    assert lines[2] == "done with x / done with y"


def test_readme_example_is_the_quickstart_file() -> None:
    readme = (ROOT / "README.md").read_text()
    example = (ROOT / "examples" / "quickstart.py").read_text()
    block = readme.split("```python\n", 1)[1].split("```", 1)[0]
    # the calls the README shows are the ones the file makes
    for call in ('rt.run("lead", "the job")', "ctx.gather(", 'FunctionAgent.create("fan-out"'):
        assert call in block and call in example


def test_readme_starts_with_the_two_commands() -> None:
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", readme, re.DOTALL)
    assert blocks[0].strip().endswith(".venv/bin/subagents demo")
    assert blocks[1].strip().endswith(".venv/bin/python -m pytest -q -n 2 --dist loadgroup")
    ci = (ROOT / ".ci" / "run").read_text()
    assert blocks[1].strip() in ci


def test_the_approvals_example_answers_through_the_store_and_continues_the_run() -> None:
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "approvals.py")],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "pending: builder wants Bash {'command': 'echo built | tee out.txt'}",
        "completed - the shell said: built",
        "continued: completed - it is in out.txt",
    ]
