"""Run a demo team on the offline model and watch it work (no network, no API key).

The team in agents/demo shows, in a few seconds: a parallel fan-out of six children, a
grandchild at depth 2, two siblings mailing each other with a reply, runs queued under the
concurrency limit, a child over its timeout while the others finish, a child restarted by the
supervisor after its model call failed, a child stopped at its token budget, and the lead
combining what came back.
"""

from __future__ import annotations

import argparse
import sys
import threading
from pathlib import Path

import msgspec

from subagents.cli.live import LiveTree, watch
from subagents.cli.output import console
from subagents.cli.summary import print_outcome
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime
from subagents.supervision.limits import Limits

QUESTION = "how should a small team adopt an actor runtime for its agents?"


def demo_dir() -> Path | None:
    """The demo team: next to the source tree (editable install) or under the cwd."""
    here = Path(__file__).resolve()
    for candidate in (here.parents[3] / "agents" / "demo", Path.cwd() / "agents" / "demo"):
        if (candidate / "lead.md").is_file():
            return candidate
    return None


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
        print(
            "subagents demo: cannot find the demo team (agents/demo/lead.md); run it from the"
            " repository or pass --agents DIR",
            file=sys.stderr,
        )
        return 2
    out = console()
    tree = LiveTree()
    done = threading.Event()
    limits = Limits(max_concurrency=4, per_agent=4, max_children=6, timeout_s=60.0)
    # offline whatever the environment: the scripts in the team's frontmatter
    with Runtime(agent_dirs=[folder], model=ScriptedModel.from_specs, limits=limits) as rt:
        rt.subscribe(tree.on_event)
        events: list[dict[str, str]] = []
        rt.subscribe(
            lambda e: events.append({"kind": str(e.kind), "agent": e.agent, "run_id": e.run_id})
        )
        if not args.json:
            out.print(
                f"[bold]subagents demo[/bold]: team from {folder}, offline model,"
                f" concurrency limit {limits.max_concurrency}"
            )
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
            sys.stdout.write(
                msgspec.json.encode(
                    {"outcome": outcome, "runs": records, "events": events}
                ).decode()
                + "\n"
            )
        else:
            print_outcome(out, outcome, records)
    return 0 if outcome.ok else 1
