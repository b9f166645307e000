"""``subagents demo --team code``: agents that review and fix a small repository, offline.

The demo makes a tiny Python project in a temporary git repository (``stats.py`` with a
``median`` that is wrong for even-length lists, its unittest tests, a ``test.sh``), then runs
the team shipped in ``subagents/code_team`` (``agents/code`` in the repository) on the offline
model, with the live tree: the lead sends a ``scout`` (the built-in ``explore``: Grep, Glob,
Read) and a ``tester`` (Bash: the tests fail) in parallel, a ``planner`` (the built-in
``plan``) writes the fix down, a ``fixer`` (the built-in ``code``: Read, Edit, Bash) makes it
and runs the tests, and a ``reviewer`` reads ``git diff``. Every call goes through the real
tools, in the repository, under the runtime's permissions: ``acceptEdits`` plus an allow rule
for ``sh test.sh``. The runs are recorded in the run store (``--state``, or the default), as
the default demo's are.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

    from subagents.cli.state import InspectedStore
    from subagents.messages import Event, Outcome, RunRecord

TEAM = "code_team"
TASK = "Review this repository: find why the tests fail, fix it, and have the fix reviewed."

STATS = '''"""Small statistics helpers."""


def mean(values):
    """The arithmetic mean of a non-empty list of numbers."""
    return sum(values) / len(values)


def median(values):
    """The middle value of a non-empty list (the mean of the two middle ones when even)."""
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle]
'''

TESTS = """import unittest

from stats import mean, median


class StatsTest(unittest.TestCase):
    def test_mean(self):
        self.assertEqual(mean([1, 2, 3, 4]), 2.5)

    def test_median_odd(self):
        self.assertEqual(median([3, 1, 2]), 2)

    def test_median_even(self):
        self.assertEqual(median([4, 1, 3, 2]), 2.5)


if __name__ == "__main__":
    unittest.main()
"""

README = """# stats

Small statistics helpers: `mean` and `median`.

Run the tests with `sh test.sh`.
"""


def team_dir() -> Path | None:
    """The code team shipped inside the package (an editable install or a wheel alike)."""
    from importlib.resources import files

    folder = files("subagents") / TEAM
    if not folder.joinpath("lead.md").is_file():
        return None
    return Path(str(folder))


def make_repo(root: Path, python: str = sys.executable) -> Path:
    """The demo's project, committed in a new git repository at ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "stats.py").write_text(STATS, encoding="utf-8")
    (root / "test_stats.py").write_text(TESTS, encoding="utf-8")
    (root / "README.md").write_text(README, encoding="utf-8")
    (root / ".gitignore").write_text("__pycache__/\n", encoding="utf-8")
    # the interpreter running the demo: `python3` may not be on PATH (a venv not activated)
    (root / "test.sh").write_text(
        f'#!/bin/sh\nexec "{python}" -m unittest -q "$@"\n', encoding="utf-8"
    )
    identity = ["-c", "user.name=subagents demo", "-c", "user.email=demo@subagents.invalid"]
    for args in (
        ["init", "-q"],
        ["add", "."],
        [*identity, "commit", "-q", "-m", "stats: mean and median"],
    ):
        subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True)
    return root


def run(args: argparse.Namespace) -> int:
    folder = getattr(args, "agents", None) or team_dir()
    if folder is None or not (Path(folder) / "lead.md").is_file():
        sys.stderr.write("subagents demo: error: cannot find the code team (lead.md)\n")
        return 2
    if shutil.which("git") is None:
        sys.stderr.write("subagents demo: error: the code team's demo needs git on PATH\n")
        return 2
    from subagents.cli.state import CliError, fail

    base = Path(tempfile.mkdtemp(prefix="subagents-code-demo-"))
    repo = make_repo(base / "stats")
    try:
        return _demo(args, Path(folder), repo)
    except CliError as exc:
        return fail("demo", exc)
    finally:
        if not getattr(args, "keep", False):
            shutil.rmtree(base, ignore_errors=True)


def _demo(args: argparse.Namespace, folder: Path, repo: Path) -> int:
    from subagents.cli.output import console, json_line, printable
    from subagents.cli.state import open_store, store_label
    from subagents.cli.summary import print_next_steps, print_outcome

    as_json = bool(getattr(args, "json", False))
    out = console()
    store = open_store(getattr(args, "state", None))
    try:
        run_id, outcome, records, events = _run_team(args, folder, repo, store, out)
    finally:
        store.close()
    diff = subprocess.run(
        ["git", "-C", str(repo), "diff"], capture_output=True, text=True, check=False
    ).stdout
    tests = subprocess.run(["sh", "test.sh"], cwd=repo, capture_output=True, text=True, check=False)
    kept = bool(getattr(args, "keep", False))
    if as_json:
        document = {
            "outcome": outcome,
            "runs": records,
            "events": events,
            "store": store_label(store),
            "repository": str(repo),
            "kept": kept,
            "diff": diff,
            "tests_pass": tests.returncode == 0,
        }
        sys.stdout.write(json_line(document))
    else:
        print_outcome(out, outcome, records)
        out.print()
        out.print("The change the team made (git diff):", markup=False)
        shown = printable(diff.rstrip()) or "(none)"  # what the agents wrote: escaped
        out.print(shown, markup=False, highlight=False, soft_wrap=True)
        verdict = "pass" if tests.returncode == 0 else "FAIL"
        out.print(f"The tests now {verdict} (sh test.sh).", markup=False)
        where = f"kept at {repo}" if kept else f"in {repo}, removed (--keep keeps it)"
        out.print(f"The repository was {where}.", markup=False, soft_wrap=True)
        print_next_steps(out, store_label(store), run_id, records, child_agent="fixer")
    return 0 if outcome.ok and tests.returncode == 0 else 1


def _run_team(
    args: argparse.Namespace, folder: Path, repo: Path, store: InspectedStore, out: Console
) -> tuple[str, Outcome, list[RunRecord], list[dict[str, str]]]:
    """The team's run on the offline model, in ``repo``, watched live (or quietly with
    ``--json``): the lead's run id, its outcome, the tree's records, and its events."""
    from rich.text import Text

    from subagents.cli.live import LiveTree, watch
    from subagents.definitions.discovery import BUILTIN_DIR
    from subagents.models.scripted import ScriptedModel
    from subagents.runtime import Runtime
    from subagents.supervision.limits import Limits
    from subagents.tools.permissions import Permissions

    as_json = bool(getattr(args, "json", False))
    tree = LiveTree()
    done = threading.Event()
    permissions = Permissions(mode="acceptEdits", allow=("Bash(sh test.sh:*)",))
    events: list[dict[str, str]] = []
    # restore off: the demo takes up no other process's runs
    with Runtime(
        agent_dirs=[folder, BUILTIN_DIR],  # the team extends the built-in explore/plan/code
        model=ScriptedModel.from_specs,  # offline whatever the environment
        limits=Limits(max_concurrency=4, per_agent=4, timeout_s=60.0),
        store=store,
        workspace=repo,
        permissions=permissions,
        restore=False,
    ) as rt:
        rt.subscribe(tree.on_event)
        rt.subscribe(lambda e: events.append(_event_row(e)))
        if not as_json:
            said = Text("subagents demo --team code", style="bold")  # (paths: text, not markup)
            said.append(
                f": team from {folder}, offline model, working in {repo}"
                " (permissions: acceptEdits, allow sh test.sh)"
            )
            out.print(said, soft_wrap=True)
        handle = rt.spawn("lead", getattr(args, "task", None) or TASK)

        def wait_for_lead() -> None:
            handle.result(120)
            done.set()

        threading.Thread(target=wait_for_lead, daemon=True).start()
        if as_json:
            done.wait(125)
        else:
            watch(tree, done, out)
        outcome = handle.result(timeout=5)
        return handle.run_id, outcome, rt.runs(root_run_id=handle.run_id), events


def _event_row(event: Event) -> dict[str, str]:
    """An event as ``--json`` lists it."""
    return {
        "kind": str(event.kind),
        "agent": event.agent,
        "run_id": event.run_id,
        "tool": str(event.data.get("tool", "")),
    }
