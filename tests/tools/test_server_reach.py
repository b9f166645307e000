"""No run can log in to a PostgreSQL run store: a runtime whose runs' commands could (a
server trusting them, a readable ~/.pgpass, the password handed to them) does not start; a
store whose login they cannot make, or with the network off, starts, and a real sandboxed
Bash trying to write it fails. Real runtimes, the real PostgreSQL 15 server of the tests
(``pgserver``: it asks every login for a password but ``TRUSTED_ROLE``'s), real Bash in the
real sandbox."""

from __future__ import annotations

import base64
import sys
from pathlib import Path

import psycopg
import pytest
import structlog

from pgserver import ELSEWHERE_ROLE, PASSWORD, TCP_ROLE, PgServer
from subagents.definitions.spec import AgentSpec
from subagents.messages import RunStatus
from subagents.runtime import Runtime, StoreInReach
from subagents.tools.modes import MODES
from subagents.tools.permissions import Permissions
from subagents.tools.sandbox import Sandbox
from subagents.tools.sandbox_exec import kernel_abi

from .conftest import WAIT
from .test_store_reach import calls, results

landlock = pytest.mark.skipif(kernel_abi() < 4, reason="the kernel offers no Landlock ABI 4+")
WORKER = AgentSpec(name="worker", description="The worker agent.", prompt="You act.")
WRITES = "DELETE FROM subagents.runs"


def attack(url: str, **where: str) -> str:
    """A Bash line writing the store's runs through ``url`` (and libpq ``where`` options)."""
    options = "".join(f", {k}={v!r}" for k, v in where.items())
    code = f"import psycopg; psycopg.connect({url!r}{options}, autocommit=True).execute({WRITES!r})"
    return f'{sys.executable} -c "{code}" && echo WROTE'


@landlock
def test_a_store_a_command_logs_in_to_without_a_password_does_not_start(
    pg_server: PgServer, pg_url: str, tmp_path: Path
) -> None:
    """The store's own login trusted (the server asks its role no password): a command
    logs in the same way, so the runtime refuses, naming the way in and the fix (before the
    fix it started, and a Bash line as ``attack`` deleted the runs)."""
    trusted = pg_server.trusted_url(pg_url)
    role = trusted.split("//", 1)[1].split("@", 1)[0]
    with pytest.raises(StoreInReach) as refused:
        Runtime([WORKER], workspace=tmp_path, store=trusted)
    said = str(refused.value)
    assert f"the run store {trusted} is a database server" in said
    assert f"role {role!r} over 127.0.0.1:{pg_server.port}" in said
    assert "Sandbox(network=...)" in said and "docs/store.md" in said


@landlock
@pytest.mark.parametrize("privilege", ["SUPERUSER", "approvals"])
def test_another_role_a_command_logs_in_as_that_may_write_the_store_does_not_start(
    pg_server: PgServer, pg_url: str, tmp_path: Path, privilege: str
) -> None:
    """The store's role asks a password, but the server trusts another role that may write
    the store: a superuser, or one granted the approvals table alone (a run answers its own
    asks). A command logs in as that role (its name is the server's, readable by any
    login), so the runtime refuses. Before the fix the probe tried the store's role and the
    OS user's only: the runtime started and a Bash line as that role wrote the store."""
    db = pg_url.rsplit("/", 1)[1]
    role = f"other_{privilege.lower()}_{db}"
    Runtime([WORKER], workspace=tmp_path, store=pg_url, sandbox=False).close()  # the schema
    try:
        if privilege == "SUPERUSER":
            pg_server.trusted_role(role, "SUPERUSER")
        else:
            pg_server.trusted_role(role)
            with psycopg.connect(pg_url, autocommit=True) as conn:
                conn.execute(f'GRANT USAGE ON SCHEMA subagents TO "{role}"')
                conn.execute(f'GRANT INSERT, UPDATE ON subagents.approvals TO "{role}"')
        with pytest.raises(StoreInReach, match=f"role '{role}' over 127.0.0.1"):
            Runtime([WORKER], workspace=tmp_path, store=pg_url)
    finally:
        with pg_server.admin() as admin, psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f'DROP OWNED BY "{role}"')
            admin.execute(f'DROP ROLE "{role}"')


@landlock
def test_the_stores_role_trusted_in_another_database_does_not_start(
    pg_server: PgServer, pg_url: str, tmp_path: Path
) -> None:
    """The server trusts the store's role in another database only (``postgres``): a
    command logs in there, sets the role's password (any role may set its own) and logs in
    to the store with it. The runtime refuses. Before the fix the probe tried the store's
    database alone: the runtime started, and a Bash line did just that and wrote the runs."""
    db = pg_url.rsplit("/", 1)[1]
    role = pg_server.trusted_role(f"elsewhere_{db}", f"PASSWORD '{PASSWORD}'", ELSEWHERE_ROLE)
    with pg_server.admin() as admin:
        admin.execute(f'GRANT CREATE ON DATABASE "{db}" TO "{role}"')
    store = pg_url.replace("postgres:", f"{role}:", 1)
    with pytest.raises(StoreInReach, match=f"role '{role}' over 127.0.0.1"):
        Runtime([WORKER], workspace=tmp_path, store=store)


@landlock
def test_a_store_reached_by_socket_whose_server_trusts_tcp_does_not_start(
    pg_server: PgServer, pg_url: str, tmp_path: Path
) -> None:
    """The runtime reaches its store by the unix socket, with a password; the server trusts
    a superuser over TCP (127.0.0.1) alone, which a command with the network reaches too.
    The runtime refuses. Before the fix the probe tried the store's route (the socket)
    alone, and the runtime started."""
    db = pg_url.rsplit("/", 1)[1]
    role = pg_server.trusted_role(f"tcp_{db}", "SUPERUSER", TCP_ROLE)
    by_socket = (
        f"postgresql://postgres:{PASSWORD}@/{db}?host={pg_server.data}&port={pg_server.port}"
    )
    try:
        with pytest.raises(StoreInReach, match=f"role '{role}' over 127.0.0.1"):
            Runtime([WORKER], workspace=tmp_path, store=by_socket)
    finally:
        with pg_server.admin() as admin:
            admin.execute(f'DROP ROLE "{role}"')


@landlock
def test_a_password_in_a_file_a_command_reads_does_not_start(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runtime's password read from ~/.pgpass, which a command (same user, reads not
    restricted) reads too: the sandboxed probe logs in with it, and the runtime refuses.
    With reads restricted to paths that leave the home directory out, it starts."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".pgpass").write_text(f"*:*:*:postgres:{PASSWORD}\n")
    (home / ".pgpass").chmod(0o600)
    monkeypatch.setenv("HOME", str(home))
    bare = pg_url.replace(f":{PASSWORD}@", "@", 1)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with pytest.raises(StoreInReach, match=r"role 'postgres' over 127\.0\.0\.1"):
        Runtime([WORKER], workspace=workspace, store=bare)
    hidden = Sandbox(readable=[str(workspace)])
    with Runtime([WORKER], workspace=workspace, store=bare, sandbox=hidden) as rt:
        assert rt.store.list_runs() == []


@landlock
def test_a_password_handed_to_the_commands_does_not_start(pg_url: str, tmp_path: Path) -> None:
    """``tool_env`` passing the store's URL (or $PGPASSWORD) to the commands: refused,
    naming the variable, never its value."""
    with pytest.raises(StoreInReach) as refused:
        Runtime([WORKER], workspace=tmp_path, store=pg_url, tool_env={"DATABASE_URL": pg_url})
    said = str(refused.value)
    assert "the commands of runs get the variable DATABASE_URL" in said
    assert PASSWORD not in said


def _in_url(url: str, password: str) -> str:
    return url.replace(f":{PASSWORD}@", f":{password}@", 1)


ENCODED = {  # each as a value of the commands' environment
    "percent": lambda url: _in_url(url, "".join(f"%{ord(c):02x}" for c in PASSWORD)),
    "percent twice": lambda url: _in_url(url, "%2574" + PASSWORD[1:]),
    "conninfo escapes": lambda _url: "host=db password=te\\st-only-\\secret",
    "base64": lambda _url: base64.b64encode(PASSWORD.encode()).decode(),
}


@landlock
@pytest.mark.parametrize("spelling", sorted(ENCODED))
def test_a_password_handed_to_the_commands_encoded_does_not_start(
    pg_url: str, tmp_path: Path, spelling: str
) -> None:
    """The store's password in ``tool_env`` spelled otherwise than as it is (libpq decodes
    a URL's percent-encoding and a connection string's escapes; base64 any command
    decodes): refused as the literal is. Before: the literal match missed each, and the
    runtime started with the commands holding the password."""
    value = ENCODED[spelling](pg_url)
    assert PASSWORD not in value
    with pytest.raises(StoreInReach, match="the commands of runs get the variable STORE_LOGIN"):
        Runtime([WORKER], workspace=tmp_path, store=pg_url, tool_env={"STORE_LOGIN": value})


@landlock
@pytest.mark.parametrize("network", ["on", "off"])
def test_a_commands_attempts_on_a_store_out_of_its_reach_fail(
    pg_server: PgServer, pg_url: str, tmp_path: Path, network: str
) -> None:
    """Network on, a store whose login asks a password the commands never get: the runtime
    starts, and a Bash line without it is refused by the server over TCP and the unix
    socket. Network off in every mode, even a trusting server: the runtime starts, and the
    sandbox refuses the socket itself, TCP and unix alike (seccomp, ``sandbox_syscalls``)."""
    sandbox = Sandbox(network=dict.fromkeys(MODES, network))
    store = pg_url if network == "on" else pg_server.trusted_url(pg_url)
    bare = store.replace(f":{PASSWORD}@", "@", 1)
    socket = {"host": str(pg_server.data)}
    lines = [attack(bare), attack(bare, **socket)]
    if network == "off":  # what libpq meets, said plainly (its own message says nothing)
        unix = f"import socket; socket.socket(socket.AF_UNIX).connect({pg_server.socket!r})"
        lines.append(f'{sys.executable} -c "{unix}" && echo WROTE')
    model = calls(*(("Bash", {"command": line}) for line in lines))
    permissions = Permissions(mode="acceptEdits", allow=("Bash",))
    with (
        structlog.testing.capture_logs() as logs,
        Runtime(
            [WORKER], model=model, workspace=tmp_path, store=store, sandbox=sandbox,
            permissions=permissions,
        ) as rt,
    ):  # fmt: skip
        run = rt.run("worker", "try the store", wait=WAIT)
        assert run.status is RunStatus.COMPLETED
        assert [r.run_id for r in rt.store.list_runs()] == [run.run_id]
    shown = [r.content for r in results(model)]
    assert len(shown) == len(lines) and not any("WROTE" in said for said in shown), shown
    if network == "on":
        assert all("no password supplied" in said for said in shown), shown
    else:
        assert all("OperationalError: connection is bad" in said for said in shown[:2]), shown
        assert "PermissionError: [Errno 13] Permission denied" in shown[2], shown
    assert not [e for e in logs if e["log_level"] == "warning" and "store" in e], logs


def test_without_a_sandbox_a_server_store_starts_and_says_it_is_open(
    pg_server: PgServer, pg_url: str, tmp_path: Path
) -> None:
    """Commands with the user's rights (they could read the runtime's own memory): refusing
    would leave no way to run commands, so the runtime starts and warns, naming the store,
    even on a trusting server, and probes nothing."""
    trusted = pg_server.trusted_url(pg_url)
    with (
        structlog.testing.capture_logs() as logs,
        Runtime([WORKER], workspace=tmp_path, store=trusted, sandbox=False),
    ):
        pass
    warned = [e for e in logs if "could log in to the run store's server" in e["event"]]
    assert len(warned) == 1 and warned[0]["store"] == trusted, logs
