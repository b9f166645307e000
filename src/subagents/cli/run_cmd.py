"""Run an agent on a task, watch its tree work, print the result (`subagents run AGENT TASK`).

A live tree (status, agent, depth, elapsed time, steps, tokens) redraws on a terminal; a pipe
gets one line per transition and the tree at the end. Then the result and one line per run.
Runs are recorded in the store (--state, or the default), so `subagents ps`, `log`, `info`,
`tree` work from another terminal meanwhile, and `stop` / `send` act on this run within a
second. This process holds a lease on its runs while it lives; if it dies, `ps` shows them
`orphaned` and `subagents resume` continues them. Without ANTHROPIC_API_KEY (or with
--offline) the offline scripted model plays each definition's `script:`.

With --detach the tree runs in a background host process (its own session: closing the
terminal does not end it; its output goes to a log beside the store) and the command prints
the root's run id and returns at once: `subagents attach RUN` watches it live from any
terminal, `subagents wait RUN` waits for its end and exits with its status code.
On a Ray cluster (--ray, $SUBAGENTS_RAY_ADDRESS) the background host is a detached actor on
the cluster's head node: the tree goes on after this command exits.

Exit status: 0 completed, 1 failed, 3 timed_out, 4 cancelled, 5 budget_exceeded,
2 bad usage (unknown agent, bad option), 130 interrupted (the runs are cancelled); with
--detach, 0 once the run is admitted.
"""

from __future__ import annotations

import argparse
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from subagents.cli.runtime_args import (
    Hosted,
    add_runtime_arguments,
    approval_route,
    start_runtime,
)
from subagents.cli.state import EXIT_FOR_STATUS, EXIT_USAGE, CliError, fail, store_label

if TYPE_CHECKING:
    from subagents.runtime import RunHandle, Runtime

MAX_TIMEOUT_S = 3600.0
"""``supervision.limits.MAX_TIMEOUT_S`` (a test keeps them equal), written here so that
`subagents run --help` imports nothing heavy."""

NAME = "run"
APPROVAL_ROUTES = ("terminal", "store", "deny")
"""Where `run --approvals` sends a tool call's ask (``runtime_args.approval_route``)."""
CLEANUP_CHOICES = ("keep", "delete")
"""``messages.CLEANUPS`` written out: `subagents run --help` imports no msgspec (its test in
tests/cli/test_cli_main.py); tests/test_type_aliases.py keeps the two equal."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("agent", metavar="AGENT", help="the agent definition to run")
    parser.add_argument("task", metavar="TASK", help="what to do (- reads it from stdin)")
    add_run_options(parser)
    add_ray_option(parser)


def add_ray_option(parser: argparse.ArgumentParser) -> None:
    """``--ray ADDRESS``: the tree hosted on a Ray cluster (`run`, `continue`)."""
    parser.add_argument(
        "--ray",
        default=None,
        metavar="ADDRESS",
        help="run the tree on the Ray cluster at ADDRESS (`auto`: the cluster `ray start` runs"
        " on this machine), its runs in the cluster's nodes, recorded in the cluster's store;"
        " default: $SUBAGENTS_RAY_ADDRESS when set and --state is not given",
    )


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """The options of a root run and of the runtime hosting it (`run`, `continue`)."""
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        metavar="S",
        help=f"the root run's timeout in seconds (default 300, at most {MAX_TIMEOUT_S:g})",
    )
    parser.add_argument(
        "--budget",
        type=int,
        default=None,
        metavar="TOKENS",
        help="token budget of the whole tree (ends budget_exceeded when spent)",
    )
    parser.add_argument(
        "--cleanup",
        choices=CLEANUP_CHOICES,
        default=None,
        help="once archived, keep the tree's transcripts or delete them (default: each"
        " definition's cleanup, else keep)",
    )
    parser.add_argument(
        "--label",
        default=None,
        metavar="TEXT",
        help="a short name for the root run, shown by `ps` and the console, and matched by"
        " `ps --label` (at most 200 characters)",
    )
    parser.add_argument(
        "--detach",
        action="store_true",
        help="run the tree in a background process; print the root's run id and return"
        " (then `subagents attach RUN`, `wait RUN`)",
    )
    parser.add_argument(
        "--approvals",
        choices=APPROVAL_ROUTES,
        default=None,
        help="where a tool call that needs approval is asked: `terminal` (you are asked here),"
        " `store` (it waits in the store for `subagents approve`/`deny` from any terminal),"
        " `deny` (denied, the model is told why); default: terminal when stdin and stdout are"
        " one (and no --json), else deny; --detach: store",
    )
    add_runtime_arguments(parser)


def _check(args: argparse.Namespace) -> str:
    """The run's own options, by the rules every entry point applies
    (``supervision.requests``), in the command line's words (the option's name)."""
    from subagents.messages import SpawnRequest
    from subagents.supervision.limits import Limits
    from subagents.supervision.requests import request_problem, timeout_problem

    if timeout_problem(args.timeout, Limits()) is not None:
        raise CliError(
            f"--timeout must be in (0, {MAX_TIMEOUT_S:g}] seconds, got {args.timeout:g}", EXIT_USAGE
        )
    if args.budget is not None and args.budget < 1:
        raise CliError(
            f"--budget must be a positive number of tokens, got {args.budget}", EXIT_USAGE
        )
    from subagents.cli.text_input import text_argument

    what = "TEXT" if _continuing(args) else "TASK"  # as each command's usage names it
    task = text_argument(args.task, what)
    if not task.strip():
        raise CliError(f"{what} is empty", EXIT_USAGE)
    request = SpawnRequest(
        request_id="", agent=args.agent, task=task, timeout=args.timeout, label=args.label
    )
    problem = request_problem(request, Limits())
    if problem is not None:  # what else the runtime would refuse (a task over the size cap)
        raise CliError(problem, EXIT_USAGE)
    return task


def _continuing(args: argparse.Namespace) -> bool:
    """Whether this is `subagents continue` (which runs through here)."""
    return getattr(args, "continues", None) is not None


def _name(args: argparse.Namespace) -> str:
    """The command's name for its errors: `run`, or `continue`."""
    return "continue" if _continuing(args) else NAME


def run(args: argparse.Namespace) -> int:
    try:
        task = _check(args)
        route = approval_route(args)
        if args.detach:
            return _detach(args, task)
        hosted = start_runtime(args, restore=False, approvals_in_store=route == "store")
    except CliError as exc:
        return fail(_name(args), exc)
    try:
        return _run(args, hosted, task)
    except CliError as exc:
        return fail(_name(args), exc)
    except KeyboardInterrupt:
        sys.stderr.write("subagents run: interrupted: cancelling the runs\n")
        raise
    finally:
        hosted.close()


def _detach(args: argparse.Namespace, task: str) -> int:
    """The tree in a background host (``cli.detach``); here, its run id once admitted. On a
    Ray cluster, the host is a detached actor on its head node (``runtime._detached_trees``)."""
    from subagents.cli import output
    from subagents.cli.detach import detach
    from subagents.cli.runtime_args import cluster_from
    from subagents.store.locations import default_location, is_database_url, local_folder

    address = cluster_from(args) if getattr(args, "continues", None) is None else None
    if address is not None and is_database_url(args.state):
        raise CliError(
            "--detach on a Ray cluster records in the cluster's store: a postgresql:// --state"
            " goes with --ray for attached runs only (docs/cluster.md)",
            EXIT_USAGE,
        )
    if address is not None:
        return _detach_on_cluster(args, task, address)

    def host(report: Callable[[str], None]) -> int:
        try:  # no one is at its terminal: its asks wait in the store (`subagents approvals`)
            hosted = start_runtime(args, restore=False, approvals_in_store=True)
        except CliError as exc:
            return fail(_name(args), exc)
        try:
            return _run(args, hosted, task, on_admitted=report)
        except CliError as exc:
            return fail(_name(args), exc)
        finally:
            hosted.close()

    state_dir = local_folder(args.state or default_location())
    done = detach(state_dir, host)
    if isinstance(done, int):
        return done
    if args.json:
        output.print_json({"run_id": done.run_id, "pid": done.pid, "log": str(done.log)})
    else:
        print(done.run_id)
        sys.stderr.write(
            f"subagents run: {args.agent} is run {done.run_id}, hosted in the background by"
            f" pid {done.pid} (log {done.log}); `subagents attach {done.run_id}` to watch it,"
            f" `subagents wait {done.run_id}` for its end\n"
        )
    return 0


def _detach_on_cluster(args: argparse.Namespace, task: str, address: str) -> int:
    """The tree in a tree host on the cluster's head (``runtime._detached_trees``): the definitions
    are read here and travel with it; this command returns once the root is admitted."""
    from subagents.cli import output
    from subagents.cli.runtime_args import definitions_from, runtime_options
    from subagents.cluster.connect import ClusterError
    from subagents.runtime import start_detached
    from subagents.supervision.core import AdmissionError

    options = runtime_options(args)
    agents = definitions_from(args)
    names = sorted(spec.name for spec in agents)
    if args.agent not in names:  # refused here: no host is started for nothing
        raise CliError(
            f"unknown agent {args.agent!r}; known agents: {', '.join(names)}", EXIT_USAGE
        )
    options.update(agents=agents, agent_dirs=[], discover=False, approve="store")
    try:
        tree = start_detached(
            args.agent,
            task,
            cluster=address,
            options={
                "model": args.model,
                "timeout": args.timeout,
                "token_budget": args.budget,
                "cleanup": args.cleanup,
                "label": args.label,
            },
            **options,
        )
    except AdmissionError as exc:
        raise CliError(str(exc), EXIT_USAGE) from exc
    except ClusterError as exc:
        raise CliError(str(exc)) from exc
    if args.json:
        output.print_json(
            {"run_id": tree.run_id, "host": tree.host, "pid": tree.pid, "node": tree.node}
        )
    else:
        print(tree.run_id)
        sys.stderr.write(
            f"subagents run: {args.agent} is run {tree.run_id}, hosted on the cluster by"
            f" {tree.host} (pid {tree.pid} on the head node); `subagents wait {tree.run_id}"
            f" --ray {address}` for its end\n"
        )
    return 0


def _say_where_asks_wait(hosted: Hosted) -> None:
    """A foreground run's asks go to the store (`--approvals store`): where to answer them."""
    sys.stderr.write(
        f"subagents run: calls that need approval wait in the store {store_label(hosted.store)}:"
        " `subagents approvals` lists them, `subagents approve ID` or `deny ID` answers"
        " them from any terminal\n"
    )


def _started(
    rt: Runtime, args: argparse.Namespace, task: str, options: dict[str, Any]
) -> RunHandle:
    """The root run started (``subagents continue``: the run continued), once admitted: a
    refusal is a usage error (exit 2), whether said at once or by the runtime's state."""
    from subagents.supervision.core import AdmissionError

    continues: str | None = getattr(args, "continues", None)
    try:
        if continues is not None:
            return rt.continue_run(continues, task, **options)
        handle = rt.spawn(args.agent, task, **options)
        handle.wait_admitted()
        return handle
    except AdmissionError as exc:
        raise CliError(str(exc), EXIT_USAGE) from exc


def _run(
    args: argparse.Namespace,
    hosted: Hosted,
    task: str,
    on_admitted: Callable[[str], None] | None = None,
) -> int:
    from subagents.cli.live import LiveTree, watch
    from subagents.cli.output import console, json_line
    from subagents.cli.summary import print_outcome
    from subagents.logs import note

    rt = hosted.runtime
    tree = LiveTree()
    rt.subscribe(tree.on_event)
    options = {
        "model": args.model,
        "timeout": args.timeout,
        "token_budget": args.budget,
        "cleanup": args.cleanup,
        "label": args.label,
    }
    handle = _started(rt, args, task, options)
    if on_admitted is not None:
        on_admitted(handle.run_id)
    note(
        f"subagents run: {args.agent} is run {handle.run_id} (store {store_label(hosted.store)});"
        " `subagents ps`, `log`, `stop`, `send` reach it from another terminal"
    )
    if getattr(args, "approvals", None) == "store" and on_admitted is None:
        _say_where_asks_wait(hosted)
    done = threading.Event()

    def wait_for_root() -> None:
        handle.result()
        wait_for_outliving(rt, handle.run_id)
        done.set()

    threading.Thread(target=wait_for_root, name="run-waiter", daemon=True).start()
    out = console()
    if args.json:
        done.wait()
    else:
        watch(tree, done, out, approvals=hosted.approvals)
    outcome = handle.result(timeout=0)
    records = rt.runs(root_run_id=handle.run_id)
    if args.json:
        sys.stdout.write(json_line({"outcome": outcome, "runs": records}))
    else:
        print_outcome(out, outcome, records)
    return EXIT_FOR_STATUS.get(outcome.status, 1)


def wait_for_outliving(rt: Runtime, root_run_id: str) -> None:
    """The root has ended: wait for the runs of its tree that outlive it (detached children
    and theirs), which this process hosts, before it closes the runtime (which would cancel
    them). Ctrl-C cancels them, as it does the tree."""
    from subagents.messages import RunStatus

    live = (RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.WAITING)
    while True:
        left = [r.run_id for r in rt.runs(root_run_id=root_run_id, status=live)]
        if not left:
            return
        rt.wait_all(left)
