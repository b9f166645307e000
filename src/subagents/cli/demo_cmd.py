"""Run a demo team on the offline model and watch it work (no network, no API key).

The team (shipped with subagents; `agents/demo` in the repository) shows, in a few seconds: a
parallel fan-out of six children, a grandchild at depth 2, two siblings mailing each other
with a reply, runs queued under the concurrency limit, a child over its timeout while the
others finish, a child restarted by the supervisor after its model call failed, a child
stopped at its token budget, and the lead combining what came back.

The runs are recorded in the run store (--state, or the default), like those of `subagents
run`: afterwards `subagents ps --all`, `tree`, `log` and `info` show them. `subagents run lead
"..." --agents agents/demo` runs the same team.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from subagents.cli.state import CliError, add_state_argument, fail

if TYPE_CHECKING:
    pass

NAME = "demo"
QUESTION = "how should a small team adopt an actor runtime for its agents?"
TEAM = "demo_team"
"""The team's folder inside the installed package (package data, so a wheel has it)."""


def demo_dir() -> Path | None:
    """The demo team shipped inside the package (an editable install or a wheel alike)."""
    from importlib.resources import files

    folder = files("subagents") / TEAM
    if not folder.joinpath("lead.md").is_file():
        return None
    return Path(str(folder))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--team",
        choices=("default", "code"),
        default="default",
        help="default: the research team; code: agents that review and fix a small repository",
    )
    parser.add_argument("--agents", type=Path, default=None, help="the demo team's folder")
    parser.add_argument("--task", default=None, help="the task the lead works on")
    parser.add_argument("--json", action="store_true", help="print the runs as JSON at the end")
    add_state_argument(parser)
    parser.add_argument(
        "--keep", action="store_true", help="--team code: keep the repository it worked on"
    )


def run(args: argparse.Namespace) -> int:
    if args.team == "code":
        from subagents.cli import code_demo

        return code_demo.run(args)
    args.task = args.task or QUESTION
    folder = args.agents or demo_dir()
    if folder is None or not (Path(folder) / "lead.md").is_file():
        where = f" in {folder}" if folder is not None else ""
        sys.stderr.write(
            f"subagents demo: error: cannot find the demo team (lead.md){where}; pass"
            " --agents DIR\n"
        )
        return 2
    try:
        return _demo(args, Path(folder))
    except CliError as exc:
        return fail(NAME, exc)


def _demo(args: argparse.Namespace, folder: Path) -> int:
    from rich.text import Text

    from subagents.cli.live import LiveTree, watch
    from subagents.cli.output import console, json_line
    from subagents.cli.state import open_store, store_label
    from subagents.cli.summary import print_next_steps, print_outcome
    from subagents.models.scripted import ScriptedModel
    from subagents.runtime import Runtime
    from subagents.supervision.limits import Limits

    out = console()
    tree = LiveTree()
    done = threading.Event()
    limits = Limits(max_concurrency=4, per_agent=4, timeout_s=60.0)
    store = open_store(args.state)
    try:
        # offline whatever the environment: the scripts in the team's frontmatter; restore
        # off: the demo takes up no other process's runs; an empty workspace of its own:
        # its runs write nothing, and started in the home directory, the default store
        # would be inside the workspace (a runtime refuses that: runtime/_store_reach.py)
        with (
            tempfile.TemporaryDirectory(prefix="subagents-demo-") as workspace,
            Runtime(
                agent_dirs=[folder],
                model=ScriptedModel.from_specs,
                limits=limits,
                store=store,
                restore=False,
                workspace=workspace,
            ) as rt,
        ):
            rt.subscribe(tree.on_event)
            events: list[dict[str, str]] = []
            rt.subscribe(
                lambda e: events.append({"kind": str(e.kind), "agent": e.agent, "run_id": e.run_id})
            )
            if not args.json:
                said = Text("subagents demo", style="bold")  # (the folder: text, not markup)
                said.append(
                    f": team from {folder}, offline model,"
                    f" concurrency limit {limits.max_concurrency}"
                )
                out.print(said, soft_wrap=True)
            handle = rt.spawn("lead", args.task)

            def wait_for_lead() -> None:
                handle.result(120)
                done.set()

            waiter = threading.Thread(target=wait_for_lead, daemon=True)
            waiter.start()
            if args.json:
                done.wait(125)
            else:
                watch(tree, done, out)
            outcome = handle.result(timeout=5)
            records = rt.runs(root_run_id=handle.run_id)
            if args.json:
                document = {
                    "outcome": outcome,
                    "runs": records,
                    "events": events,
                    "store": store_label(store),
                }
                sys.stdout.write(json_line(document))
            else:
                print_outcome(out, outcome, records)
                print_next_steps(out, store_label(store), handle.run_id, records)
    finally:
        store.close()
    return 0 if outcome.ok else 1
