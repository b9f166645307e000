"""The options shared by the commands that host a Runtime (`run`, `resume`), and the Runtime
they describe: definitions, model, limits, store.

Why one place: `resume` must build the same runtime `run` did (the same agent folders, the
same model choice) or restored runs would find their agents missing. The model is chosen
before the Runtime starts, because a restore begins stepping runs inside its constructor.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from subagents.cli.state import (
    EXIT_USAGE,
    STATE_ENV,
    CliError,
    add_json_argument,
    add_state_argument,
    is_directory,
)

if TYPE_CHECKING:  # the runtime and the SDK are imported only by the commands that run agents
    from collections.abc import Callable

    from subagents.cli.approvals import TerminalApprovals
    from subagents.cli.fresh_store import FreshStore
    from subagents.cli.state import InspectedStore
    from subagents.cluster.remote_store import ClusterStore
    from subagents.definitions.spec import AgentSpec
    from subagents.models.base import Model
    from subagents.runtime import Runtime
    from subagents.store.base import RunStore
    from subagents.supervision.limits import Limits
    from subagents.tools.permissions import Permissions

API_KEY_ENV = "ANTHROPIC_API_KEY"


def add_runtime_arguments(parser: argparse.ArgumentParser) -> None:
    _add_model_arguments(parser)
    _add_limit_arguments(parser)
    _add_tool_arguments(parser)
    parser.add_argument(
        "--strict",
        action="store_true",
        help="refuse to start when an agent definition has a problem (a tool this runtime"
        " does not have included), instead of warning",
    )
    add_json_argument(parser)
    add_state_argument(parser)


def _add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """Where definitions come from, and the model runs use."""
    parser.add_argument(
        "--agents",
        dest="agent_dirs",
        action="append",
        default=[],
        type=Path,
        metavar="DIR",
        help="load agent definitions from DIR too (repeatable; besides .claude/agents/ found"
        " from the working directory, ~/.claude/agents/ and the built-in agents)",
    )
    parser.add_argument(
        "--model",
        metavar="M",
        default=None,
        help="the model of the root run and the default of runs whose definition names none"
        " (an alias: opus, sonnet, haiku, fable; or a full model id)",
    )
    parser.add_argument(
        "--offline",
        action="store_true",
        help="use the offline scripted model even when ANTHROPIC_API_KEY is set",
    )


def _add_limit_arguments(parser: argparse.ArgumentParser) -> None:
    """The runtime's limits: depth, concurrency, the queue, children, turns."""
    parser.add_argument("--max-depth", type=int, default=None, metavar="N", help="default 3")
    parser.add_argument(
        "--max-concurrency",
        type=int,
        default=None,
        metavar="N",
        help="live runs at once, in all and of one agent (default 10, and 5 of one agent)",
    )
    parser.add_argument(
        "--max-runs-per-tree",
        type=int,
        default=None,
        metavar="N",
        help="the most runs one root's tree may admit, finished ones included (default: no bound)",
    )
    parser.add_argument(
        "--queue-bound",
        type=int,
        default=None,
        metavar="N",
        help="runs that may wait in the admission queue (default 20000); past it, spawns are"
        " refused",
    )
    parser.add_argument(
        "--per-agent",
        type=int,
        default=None,
        metavar="N",
        help="live runs of one agent at once (default 5, or --max-concurrency)",
    )
    parser.add_argument(
        "--max-children",
        type=int,
        default=None,
        metavar="N",
        help="live children of one run at once, a ceiling for the definitions' maxChildren"
        " too (default: 5, a definition's maxChildren up to 50)",
    )
    parser.add_argument(
        "--max-turns", type=int, default=None, metavar="N", help="model turns of one run (50)"
    )


def _add_tool_arguments(parser: argparse.ArgumentParser) -> None:
    """Where tools work and what they may do: permissions, hooks, MCP commands, the sandbox
    and the environment of their processes."""
    parser.add_argument(
        "--workspace",
        type=Path,
        default=None,
        metavar="DIR",
        help="where file tools work and Bash starts; no path outside it is reached (default:"
        " the working directory)",
    )
    parser.add_argument(
        "--permission-mode",
        default="default",
        choices=("default", "acceptEdits", "plan", "dontAsk", "bypassPermissions"),
        help="Claude Code's permission mode for every run (a definition may only tighten it;"
        " default: 'default', which asks before edits and commands)",
    )
    parser.add_argument(
        "--allow",
        action="append",
        default=[],
        metavar="RULE",
        help="a permission rule whose calls run without asking, e.g. 'Bash(npm test:*)',"
        " 'Edit(docs/**)' (repeatable)",
    )
    parser.add_argument(
        "--deny",
        action="append",
        default=[],
        metavar="RULE",
        help="a permission rule whose calls are refused, e.g. 'Bash(git push:*)' (repeatable)",
    )
    parser.add_argument(
        "--allow-hooks",
        action="store_true",
        help="run the hooks of agent definitions (shell commands from the files)",
    )
    parser.add_argument(
        "--allow-mcp-commands",
        action="store_true",
        help="start the stdio MCP servers that files declare (commands from the agent"
        " definitions and the project's .mcp.json); remote servers start without it",
    )
    parser.add_argument(
        "--no-sandbox",
        action="store_true",
        help="run tools' processes (Bash, hooks, stdio MCP servers) without the Landlock"
        " sandbox that bounds what they may write and reach (docs/tools.md)",
    )
    parser.add_argument(
        "--tool-env",
        action="append",
        default=[],
        metavar="NAME[=VALUE]",
        help="an environment variable tools' processes get beyond the allowlist (its value"
        " from this environment, or VALUE; repeatable): API keys stay out unless named",
    )


@dataclass
class Hosted:
    """A started Runtime and the store it writes (closed by ``close``, runtime first)."""

    runtime: Runtime
    store: InspectedStore
    offline: bool
    approvals: TerminalApprovals | None = None
    """Asks the person at the terminal (None on a pipe or in CI: every ask is denied)."""
    fresh: FreshStore | None = None
    """The store's file when this command's opening made it: removed at the close if
    nothing was recorded in it (a run refused before it was admitted)."""

    def close(self) -> None:
        if self.approvals is not None:
            self.approvals.close()
        try:
            self.runtime.close()
        finally:
            closed(self.store, self.fresh)
            close_model = getattr(self.runtime.model, "close", None)  # the SDK's HTTP pool
            if callable(close_model):
                close_model()


def limits_from(args: argparse.Namespace, *, timeout: float | None = None) -> Limits:
    from subagents.supervision.limits import LimitError, Limits

    values: dict[str, object] = {}
    if args.max_depth is not None:
        values["max_depth"] = args.max_depth
    if args.max_concurrency is not None:
        values["max_concurrency"] = args.max_concurrency
        values["per_agent"] = args.max_concurrency  # asked for N at once: N of one agent too
    if getattr(args, "max_runs_per_tree", None) is not None:
        values["max_runs_per_tree"] = args.max_runs_per_tree
    if getattr(args, "queue_bound", None) is not None:
        values["queue_bound"] = args.queue_bound
    if args.per_agent is not None:
        values["per_agent"] = args.per_agent
    if args.max_children is not None:  # given here, it is the ceiling for definitions too
        values["max_children"] = values["max_children_cap"] = args.max_children
    if args.max_turns is not None:
        values["max_turns"] = args.max_turns
    if timeout is not None:
        values["timeout_s"] = timeout
    try:
        return Limits(**values)  # type: ignore[arg-type]
    except LimitError as exc:
        option = str(exc).replace("limit timeout_s", "--timeout").replace("limit ", "--")
        raise CliError(option.replace("_", "-"), EXIT_USAGE) from exc


def is_offline(args: argparse.Namespace) -> bool:
    return bool(args.offline or not os.environ.get(API_KEY_ENV))


def choose_model(args: argparse.Namespace) -> Model | Callable[[list[AgentSpec]], Model]:
    """Claude with a key (and no --offline); else the offline model playing the scripts in
    the definitions' frontmatter (built by the Runtime from the definitions it loads), with a
    note on stderr saying so."""
    from subagents.models.base import ModelError

    for d in args.agent_dirs:
        if not is_directory(Path(d), f"--agents {d}"):
            raise CliError(f"--agents {d}: not a directory", EXIT_USAGE)
    if not is_offline(args):
        from subagents.models.anthropic import AnthropicModel

        try:
            return AnthropicModel(default_model=args.model)
        except ModelError as exc:
            raise CliError(f"the anthropic model: {exc}") from exc
    from subagents.models.script import ScriptError
    from subagents.models.scripted import ScriptedModel

    why = "--offline" if args.offline else f"{API_KEY_ENV} is not set"
    sys.stderr.write(
        f"subagents: {why}: using the offline scripted model (it plays the `script:` of each"
        " agent definition; agents without one answer at once)\n"
    )

    def offline(specs: list[AgentSpec]) -> Model:
        try:
            return ScriptedModel.from_specs(specs)
        except ScriptError as exc:
            raise CliError(str(exc), EXIT_USAGE) from exc

    return offline


def start_runtime(
    args: argparse.Namespace,
    *,
    restore: bool | frozenset[str],
    timeout: float | None = None,
    approvals_in_store: bool = False,
) -> Hosted:
    """A Runtime over the store of ``--state`` (or the default), as the options describe;
    ``approvals_in_store``: its asks are kept in the store for anyone to answer (a detached
    tree: no one is at its terminal), else put to the person at this terminal if any."""
    from subagents.cli.fresh_store import FreshStore
    from subagents.cli.state import open_store
    from subagents.cluster.connect import ClusterError
    from subagents.definitions.errors import DefinitionError
    from subagents.runtime import Runtime
    from subagents.store.base import StoreBusy, StoreError
    from subagents.store.locations import is_database_url

    options = runtime_options(args, timeout=timeout)
    approvals = None
    if not approvals_in_store and approval_route(args) == "terminal":
        approvals = terminal_approvals(args)
    address = cluster_from(args)
    database = is_database_url(args.state)  # on a cluster too: the driver writes it
    fresh = None if address and not database else FreshStore.before_opening(args.state)
    store = (
        open_cluster_store_for_run(address) if address and not database else open_store(args.state)
    )
    fresh = fresh and fresh.opened()
    try:
        runtime = Runtime(
            cluster=address or "",  # "": not $SUBAGENTS_RAY_ADDRESS either (--state given)
            approve="store" if approvals_in_store else approvals,
            store=store,
            restore=restore,
            **options,
        )
    except DefinitionError as exc:
        closed(store, fresh)  # a refused start leaves no store behind, as the library's
        raise CliError(str(exc), EXIT_USAGE) from exc
    except ClusterError as exc:
        closed(store, fresh)
        raise CliError(str(exc)) from exc
    except StoreError as exc:  # in the runs' reach; its write lock held by a stalled host...
        said = f"{exc}{stalled_holders(store) if isinstance(exc, StoreBusy) else ''}"
        closed(store, fresh)
        raise CliError(said) from exc
    except BaseException:
        closed(store, fresh)
        raise
    offline = is_offline(args)
    return Hosted(runtime=runtime, store=store, offline=offline, approvals=approvals, fresh=fresh)


def closed(store: RunStore, fresh: FreshStore | None) -> None:
    """Close ``store``; when this command's opening made its file (``fresh``), that file
    and its new folders go with it if nothing was recorded in it (``FreshStore.take_back``)."""
    if fresh is None:
        store.close()
    else:
        fresh.take_back(store)


def stalled_holders(store: RunStore) -> str:
    """For a store whose write lock another process held past the busy timeout: the hosts of
    this machine whose lease lapsed while their process lives on (``leases.stalled``:
    stopped or hung, so likely stopped inside a write, holding the lock), named with what
    lets them go; "" when there is none (or the leases cannot be read either)."""
    from subagents.store.base import StoreError
    from subagents.store.leases import stalled

    try:
        stuck = [lease for lease in store.leases() if stalled(lease)]
    except StoreError:
        return ""
    if not stuck:
        return ""
    named = ", ".join(f"{lease.host} pid {lease.pid}" for lease in stuck)
    return (
        f"; likely held by a host stopped or hung inside a write: {named} (its lease lapsed,"
        " its process lives: `kill -CONT PID` lets a stopped one go on; once it has ended,"
        " `subagents resume` takes its runs)"
    )


def runtime_options(args: argparse.Namespace, *, timeout: float | None = None) -> dict[str, Any]:
    """The Runtime's keyword arguments the options describe (all but its store, cluster,
    restore and approval handler: the caller's), each checked: a bad one is a ``CliError``
    before anything starts."""
    from subagents.store.leases import lease_seconds

    try:
        lease_seconds()  # SUBAGENTS_LEASE_S, checked before anything starts
    except ValueError as exc:
        raise CliError(str(exc), EXIT_USAGE) from exc
    limits = limits_from(args, timeout=timeout)
    permissions = permissions_from(args)
    workspace = workspace_from(args)
    from subagents.tools.sandbox import tool_env_of

    try:
        tool_env_of(args.tool_env)
    except (TypeError, ValueError) as exc:
        raise CliError(f"--tool-env: {exc}", EXIT_USAGE) from exc
    return {
        "workspace": workspace,
        "permissions": permissions,
        "allow_hooks": args.allow_hooks,
        "allow_mcp_commands": args.allow_mcp_commands,
        "sandbox": not args.no_sandbox,
        "tool_env": list(args.tool_env),
        "model": choose_model(args),
        "limits": limits,
        "agent_dirs": list(args.agent_dirs),
        "discover": True,
        "default_model": args.model,
        "strict": args.strict,
    }


def definitions_from(args: argparse.Namespace) -> list[AgentSpec]:
    """The definitions the options find (``--agents`` folders, .claude/agents, the built-in
    ones), read here: what a tree hosted elsewhere (on a cluster's head) takes with it."""
    from subagents.behaviour.tools import runtime_tool_names
    from subagents.definitions.errors import DefinitionError
    from subagents.runtime._assembly import catalog_for, report_issues
    from subagents.tools.builtin import builtin_tools

    names = runtime_tool_names(builtin_tools())
    try:
        catalog = catalog_for([], list(args.agent_dirs), True, names, args.strict)
        report_issues(catalog.issues(), args.strict)
    except DefinitionError as exc:
        raise CliError(str(exc), EXIT_USAGE) from exc
    return list(catalog.list())


def cluster_from(args: argparse.Namespace) -> str | None:
    """The Ray cluster to run on: ``--ray ADDRESS``, else (without ``--state`` and
    ``$SUBAGENTS_STATE``) ``$SUBAGENTS_RAY_ADDRESS``; None: this process. ``--state PATH``
    and ``--ray`` together are a usage error (two stores); ``--state postgresql://...``
    goes with ``--ray``: the runs on the cluster, their store the database, which the
    driver writes directly (docs/cluster.md)."""
    from subagents.cluster.connect import ClusterError, resolve_address
    from subagents.store.locations import is_database_url

    ray: str | None = getattr(args, "ray", None)
    if ray is not None and args.state is not None and not is_database_url(args.state):
        raise CliError(
            "--state and --ray name two stores: give one (a postgresql:// --state goes with"
            " --ray: the runs on the cluster, the store the database)",
            EXIT_USAGE,
        )
    if ray is None and (args.state is not None or os.environ.get(STATE_ENV, "").strip()):
        return None  # --state, or $SUBAGENTS_STATE, names the store: this process hosts
    try:
        return resolve_address(ray)
    except ClusterError as exc:
        raise CliError(str(exc), EXIT_USAGE) from exc


def open_cluster_store_for_run(address: str) -> ClusterStore:
    """The store of the cluster at ``address`` (started on its head if none runs there)."""
    from subagents.cluster.connect import ClusterError
    from subagents.cluster.remote_store import ClusterStore
    from subagents.store.base import StoreError

    try:
        return ClusterStore.connect(address, create=True)
    except (ClusterError, StoreError) as exc:
        raise CliError(str(exc)) from exc


def permissions_from(args: argparse.Namespace) -> Permissions:
    from subagents.tools.permissions import Permissions
    from subagents.tools.rules import RuleError

    try:
        return Permissions(mode=args.permission_mode, allow=args.allow, deny=args.deny)
    except RuleError as exc:
        message = str(exc).replace("Permissions.allow", "--allow")
        raise CliError(message.replace("Permissions.deny", "--deny"), EXIT_USAGE) from exc


def workspace_from(args: argparse.Namespace) -> Path:
    workspace: Path = args.workspace if args.workspace is not None else Path.cwd()
    if not is_directory(workspace, f"--workspace {workspace}"):
        raise CliError(f"--workspace {workspace}: not a directory", EXIT_USAGE)
    return workspace


def approval_route(args: argparse.Namespace) -> str:
    """Where a call that needs approval is asked (`run --approvals`): ``terminal``,
    ``store`` or ``deny``. Default: the terminal when there is one (stdin and stdout, no
    --json), else ``deny``, as before the option: a foreground run on a pipe (CI, a script)
    that kept its asks in the store would wait, up to its timeout, for an answer no one was
    told to give; keeping them is asked for with ``store``. ``--detach``: the store (no one
    is at its terminal); asking a terminal there, or where there is none, is a usage error."""
    route: str | None = getattr(args, "approvals", None)
    detached = bool(getattr(args, "detach", False))
    if detached:
        if route not in (None, "store"):
            raise CliError(
                f"--approvals {route} with --detach: no one is at a detached tree's terminal;"
                " its asks wait in the store (`subagents approvals`)",
                EXIT_USAGE,
            )
        return "store"
    at_terminal = not args.json and sys.stdin.isatty() and sys.stdout.isatty()
    if route == "terminal" and not at_terminal:
        why = "--json prints only JSON" if args.json else "stdin or stdout is not a terminal"
        raise CliError(
            f"--approvals terminal: there is no terminal to ask ({why}); use --approvals"
            " store (answer with `subagents approve` from another terminal) or deny",
            EXIT_USAGE,
        )
    if route is None:
        return "terminal" if at_terminal else "deny"
    return route


def terminal_approvals(args: argparse.Namespace) -> TerminalApprovals | None:
    """A handler that asks the person, when there is one at a terminal (not with --json)."""
    if args.json or not (sys.stdin.isatty() and sys.stdout.isatty()):
        return None
    from subagents.cli.approvals import TerminalApprovals

    return TerminalApprovals()
