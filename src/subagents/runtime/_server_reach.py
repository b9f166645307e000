"""The run store out of the runs' reach when it is a database server's: a runtime whose runs'
commands could log in to its PostgreSQL store does not start.

Why: the store holds every run's record and the pending approvals; a session-17 review saw a
sandboxed Bash with the network write ``subagents.runs`` with psycopg through a
password-less local login (the same OS user, a server trusting local logins), and so answer
its run's own approvals. A server's store has no file to keep out of reach: a command
reaches the server like any client, so what keeps it out is a login it cannot make. Checked
here at start, before a run exists, when runs start processes (``starts_processes``) and
the network is on for one permission mode at least:

- the runtime's password must reach no command: a ``Runtime(tool_env=...)`` variable whose
  value holds it (``$PGPASSWORD``, a URL) is refused (the rest of the environment is
  scrubbed, ``tools.sandbox``);
- no login without that password as a role that may change the store (the store's own, a
  superuser, ...: ``store.postgres_login.WRITERS``), into any database, may succeed:
  ``store.postgres_probe`` tries, in the runs' own sandbox and scrubbed environment, each
  login a command could (``store.postgres_login``): a trusting or ``peer`` server, a
  readable ``~/.pgpass``, service file or client certificate is found as a command would
  find it. A probe that cannot run is a refusal too (nothing then says the store is out of
  reach).

With the network off in every mode (Landlock ABI 4+) there is nothing to check: the launcher
denies every ``socket()`` but netlink (``sandbox_syscalls``), unix sockets included, so no
command reaches any server. Without a sandbox the commands have the user's rights (they
could read the runtime's own memory): a warning, as for a SQLite store.
"""

from __future__ import annotations

import base64
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, unquote_plus

import msgspec

from subagents.behaviour.port import AgentEnv
from subagents.logs import get_logger
from subagents.runtime._store_reach import StoreInReach, hub_starts_commands, starts_processes
from subagents.store.base import RunStore
from subagents.store.locations import is_database_url, redacted
from subagents.tools.modes import MODES
from subagents.tools.sandbox import Sandbox

if TYPE_CHECKING:  # psycopg's, an optional extra
    from subagents.store.postgres_login import Login

log = get_logger("subagents.runtime")

OnEveryNode = Callable[..., list[Any]]
"""``ClusterBackend.on_every_node``: ``fn(*args)`` on each node of the cluster, the results."""

PROBE = Path(__file__).parent.parent / "store" / "postgres_probe.py"
"""Run by its text (``python -c``): its file may lie where the commands may not read."""
PROBE_TIMEOUT_S = 120.0
"""A hang guard for the probe (each of its logins gives up after 10 s)."""
NODE_GRACE_S = 30.0
"""Beyond the probe's own bound, for a node's task to be placed and answer."""
SPELLINGS = 16
"""A bound on the decoded spellings of one variable's value (each decoding of each)."""
ESCAPED = re.compile(r"\\(.)", re.DOTALL)
"""A backslash escape of a libpq connection string (``key=value``): the character after it."""
SERVER_FIX = (
    "Give the runtime a role of its own whose password no run can read (in the URL or"
    " $PGPASSWORD of the runtime alone: never in tool_env, ~/.pgpass or a service file a"
    " command may read), on a server that asks a password of it and of every role that may"
    " change the store (superusers, roles that may create roles, write or own its tables),"
    " in every database (pg_hba.conf: no trust or peer for them); or turn the runs' network"
    " off (Sandbox(network=...)). docs/store.md"
)


def check_server_reach(
    sandbox: Sandbox,
    store: RunStore,
    workspace: Path,
    *,
    processes: bool,
    nodes: OnEveryNode | None = None,
) -> None:
    """``StoreInReach`` when a run's command could write the PostgreSQL ``store``; a
    warning when no sandbox holds the commands at all. ``nodes``: checked from each node of
    the runtime's cluster instead (``ClusterBackend.on_every_node``; its runs are hosted
    there: ``Services.start_cluster``, before it places them)."""
    url = getattr(store, "url", None)
    login = getattr(store, "login", None)
    if not processes or not isinstance(url, str) or not is_database_url(url) or login is None:
        return
    held = sandbox.enabled and bool(sandbox.abi)
    if held and (sandbox.abi or 0) >= 4 and all(sandbox.network.get(m) == "off" for m in MODES):
        return
    if not held:
        if nodes is not None:  # (said once: by the driver's own check)
            return
        log.warning(
            "the runs' commands run without a sandbox: one could log in to the run store's"
            " server as the runtime does (answer its own approvals, change records)",
            store=redacted(url),
        )
        return
    made = login()
    where = redacted(url)
    if nodes is not None:
        doors = probed_on_nodes(nodes, sandbox, workspace, made, where)
    else:
        if made.password is not None:
            passed_on(sandbox, workspace, made.password, where)
        doors = probe(sandbox, workspace, made, where)
    if doors:
        raise StoreInReach(
            f"the run store {where} is a database server the commands of runs may reach"
            f" (network on), and a command logs in to it without the runtime's password as a"
            f" role that may change the store: {'; '.join(doors)}. A run could rewrite it, answer"
            f" its own approvals and change records. {SERVER_FIX}"
        )


def passed_on(sandbox: Sandbox, workspace: Path, password: str, where: str) -> None:
    """``StoreInReach`` when a variable the commands get (``tool_env``) holds the store's
    password, as it is or in a spelling libpq or a person reads back (``spellings``)."""
    run = sandbox.for_run(workspace=workspace, read_only=False, network=True)
    password_in(run.environment(None), password, where)


def password_in(environment: Mapping[str, str], password: str, where: str, node: str = "") -> None:
    """``StoreInReach`` when a variable of the commands' ``environment`` (on ``node``, a
    cluster's: "" here) holds ``password`` (``spellings``, ``base64_spellings``)."""
    encoded = base64_spellings(password)
    for name, value in environment.items():
        if any(password in each for each in spellings(value)) or any(
            each in value for each in encoded
        ):
            raise StoreInReach(
                f"the commands of runs{node} get the variable {name} (Runtime(tool_env=...)),"
                f" which holds the password of the run store {where}: a run could log in, rewrite"
                f" the store and answer its own approvals. Pass the commands another"
                f" variable. {SERVER_FIX}"
            )


def check_nodes_reach(nodes: OnEveryNode, env: AgentEnv, store: RunStore) -> None:
    """``check_server_reach`` from each node of the cluster the runtime's runs are about to
    be placed on (``Services.start_cluster``), their commands started as ``env`` says."""
    processes = starts_processes(env.tools, env.allow_hooks, hub_starts_commands(env.mcp))
    root = env.workspace.root if env.workspace is not None else Path.cwd()
    check_server_reach(env.sandbox, store, root, processes=processes, nodes=nodes)


def probed_on_nodes(
    nodes: OnEveryNode, sandbox: Sandbox, workspace: Path, login: Login, where: str
) -> list[str]:
    """The logins the probe made from each node of the cluster, which hosts the runs (a
    server's ``pg_hba.conf`` tells hosts apart; a node's files and environment are its
    own), and the password looked for in each node's commands' environment, here (it is
    not sent). A node that could not be probed refuses the start: nothing says it is safe."""
    args = (sandbox, str(workspace), login.attempts, where)
    try:
        found = nodes(reach_on_node, *args, timeout=PROBE_TIMEOUT_S + NODE_GRACE_S)
    except StoreInReach:
        raise
    except Exception as exc:  # (a node lost, no answer, no libpq or psycopg there...)
        raise StoreInReach(
            f"{where}: the check that no run may log in did not run on every node of the"
            f" cluster: {type(exc).__name__}: {exc}. {SERVER_FIX}"
        ) from exc
    doors: list[str] = []
    for host, environment, logins in found:
        if login.password is not None:
            password_in(environment, login.password, where, f" on the node {host}")
        doors += [f"{door} from the node {host}" for door in logins]
    return doors


def reach_on_node(
    sandbox: Sandbox, workspace: str, attempts: tuple[tuple[str, int, str, str], ...], where: str
) -> tuple[str, dict[str, str], list[str]]:
    """In a task on one node (``probed_on_nodes``): its host name, the environment its runs'
    commands get there (a variable named in ``tool_env`` takes this node's value), and
    the logins the probe made from it, through its own libpq."""
    from subagents.store.postgres_login import Login, libpq_path

    host = socket.gethostname()
    run = sandbox.for_run(workspace=Path(workspace), read_only=False, network=True)
    try:
        logins = probe(sandbox, Path(workspace), Login(None, attempts, libpq_path()), where)
    except StoreInReach as refused:
        raise StoreInReach(f"{refused} (on the node {host})") from None
    return host, run.environment(None), logins


def spellings(value: str) -> set[str]:
    """``value`` and what it reads as decoded the ways a password travels in a variable:
    percent-encoded (a URL's user and password, libpq decodes them; twice-encoded too),
    ``+`` for a space (a query string's), a libpq connection string's backslash escapes
    (``password=it\\'s``), and each of these of the others (at most ``SPELLINGS``)."""
    seen = {value}
    todo = [value]
    while todo and len(seen) < SPELLINGS:
        each = todo.pop()
        for decoded in (unquote(each), unquote_plus(each), ESCAPED.sub(r"\1", each)):
            if decoded not in seen:
                seen.add(decoded)
                todo.append(decoded)
    return seen


def base64_spellings(password: str) -> tuple[str, ...]:
    """The password in base64 (standard and URL-safe alphabets, without the padding): a
    value may hold it so (a secret as Kubernetes keeps it) and any command decodes it."""
    raw = password.encode()
    return tuple(
        each.decode().rstrip("=") for each in (base64.b64encode(raw), base64.urlsafe_b64encode(raw))
    )


def probe(sandbox: Sandbox, workspace: Path, login: Login, where: str) -> list[str]:
    """The logins ``store.postgres_probe`` made, run as a writing run's command (its
    sandbox, with the network, and its environment)."""
    run = sandbox.for_run(workspace=workspace, read_only=False, network=True)
    temp = Path(tempfile.mkdtemp(prefix="subagents-reach-"))
    attempts = msgspec.json.encode(login.attempts).decode()
    argv = [sys.executable, "-I", "-c", PROBE.read_text(), attempts, login.libpq]
    try:
        done = subprocess.run(
            run.argv(argv, temp),
            env=run.environment(temp),
            cwd=workspace,
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise StoreInReach(f"{where}: the check that no run may log in did not run: {exc}") from exc
    finally:
        shutil.rmtree(temp, ignore_errors=True)
    if done.returncode != 0:
        raise StoreInReach(
            f"{where}: the check that no run's command can log in to the store failed (exit"
            f" {done.returncode}): {done.stderr.strip()[-500:]}. {SERVER_FIX}"
        )
    return done.stdout.splitlines()
