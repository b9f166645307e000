"""A real, throwaway PostgreSQL server for the tests, started once per test session (per
pytest-xdist worker) and only if a test asks for it (``pg_server``).

Why a real server: the PostgreSQL store's promises (row locks, the fence, ``SKIP LOCKED``,
``LISTEN/NOTIFY``, a database that goes away and comes back) are the server's; nothing short
of one tests them. The server binaries (``initdb``, ``pg_ctl``) are PostgreSQL 15's on the
CI image (``/usr/lib/postgresql/15/bin``); the server refuses to run as root, so as root it
runs as the ``postgres`` user (``runuser``), in a temporary directory, on a free port of
127.0.0.1, and is stopped (``-m immediate``) at the end of the session.

A run killed before its end (SIGKILL, a hung worker killed, a closed terminal) used to leave
its server running for good (a newcomer found two, session 31). So the server's directory
names its owner (``OWNER``: the process's pid and start time), and what a dead run left is
stopped and removed twice over: by a watch started with the server (``python pgserver.py
watch``, in a session of its own so that a kill of the run's process group spares it), which
waits on the owner's pidfd; and, where that watch was killed too (``kill -9`` of everything),
by the next run's ``sweep_left`` before it starts its own server. A directory without the
file (a run of before session 32, or another's still being set up) is never touched: it may
be a live run's.

No server binaries, or no psycopg: the tests that need them are skipped saying which is
missing, never silently; under ``CI=true`` they fail instead (CI must run them).

Each test gets a database of its own (``new_database``), so tests never see each other's
rows; ``stop``/``start`` take the whole server away and back (the outage tests).
"""

from __future__ import annotations

import contextlib
import glob
import itertools
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    import psycopg

BIN_DIRS = ("/usr/lib/postgresql/*/bin",)
PASSWORD = "test-only-secret"
"""The ``postgres`` role's password, in every URL the server gives (``url``): the server
asks every login for one (``scram-sha-256``, local and TCP), as a store the runs' commands
cannot log into must (``runtime._server_reach``); a server trusting local logins is
refused at start whenever runs have the network."""
TRUSTED_ROLE = "trusting"
"""The group whose members the server lets in without a password (``trust``, local and TCP,
``+trusting`` in pg_hba.conf): the way a run's command logs in to a carelessly set up server
(``trusted_url``, ``trusted_role``). Its members are roles of one test each, never a
superuser left behind: a trusted role that may write any store makes every later store of
the session's server one the runs' commands reach (``runtime._server_reach``)."""
ELSEWHERE_ROLE = "trusted_elsewhere"
"""The group whose members the server trusts in the database ``postgres`` alone."""
TCP_ROLE = "trusted_over_tcp"
"""The group whose members the server trusts over TCP (127.0.0.1) alone, not by socket."""


def _binaries() -> Path | None:
    """The folder holding ``initdb`` and ``pg_ctl``: PostgreSQL's own (newest version
    first), else ``PATH``'s."""
    for pattern in BIN_DIRS:
        for found in sorted(glob.glob(pattern), reverse=True):
            if os.access(os.path.join(found, "pg_ctl"), os.X_OK):
                return Path(found)
    on_path = shutil.which("pg_ctl")
    return Path(on_path).parent if on_path and shutil.which("initdb") else None


def unavailable() -> str | None:
    """Why the PostgreSQL tests cannot run here (None: they can)."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (pip install -e '.[postgres]')"
    if _binaries() is None:
        return (
            "no PostgreSQL server binaries (initdb, pg_ctl) in /usr/lib/postgresql/*/bin or"
            " on PATH: the PostgreSQL store tests need a server to start (apt-get install"
            " postgresql)"
        )
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "running as root without runuser: the server refuses to run as root"
    return None


def require_postgres() -> None:
    """Skip (fail under CI=true) when no server can be started here, saying why."""
    why = unavailable()
    if why is None:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI must run the PostgreSQL store tests, but {why}", pytrace=False)
    pytest.skip(f"PostgreSQL store tests skipped: {why}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class PgServer:
    """The session's server: ``url(db)``, a fresh database per test, and stop/start."""

    bindir: Path
    root: Path
    port: int
    durable: bool = False
    """The server's defaults (fsync on: a commit waits for the disk); else fsync off, as
    throwaway servers for tests are (a crash of the machine loses the test anyway)."""
    _names: Iterator[int] = field(default_factory=itertools.count)
    watch: subprocess.Popen[bytes] | None = None
    """The watch of this server's owner (``_watch``), ended at the server's own stop."""

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def socket(self) -> str:
        """The server's unix socket (in its data directory)."""
        return str(self.data / f".s.PGSQL.{self.port}")

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql://postgres:{PASSWORD}@127.0.0.1:{self.port}/{dbname}"

    def trusted_url(self, url: str) -> str:
        """``url``'s database as a role of its own the server trusts (``trusted_role``),
        which may create the store there."""
        db = url.rsplit("/", 1)[1]
        role = self.trusted_role(f"trusting_{db}")
        with self.admin() as conn:
            conn.execute(f'GRANT CREATE ON DATABASE "{db}" TO "{role}"')
        return f"postgresql://{role}@127.0.0.1:{self.port}/{db}"

    def trusted_role(self, role: str, attributes: str = "", group: str = TRUSTED_ROLE) -> str:
        """``role`` made a login ``group`` trusts (``TRUSTED_ROLE``: every database;
        ``ELSEWHERE_ROLE``: ``postgres`` alone; ``TCP_ROLE``: over TCP alone), with
        ``attributes`` (``CREATE ROLE``'s)."""
        with self.admin() as conn:
            conn.execute(f'CREATE ROLE "{role}" LOGIN {attributes} IN ROLE "{group}"')
        return role

    def admin(self) -> psycopg.Connection[tuple[object, ...]]:
        """A connection as the server's superuser, committing each statement."""
        import psycopg

        return psycopg.connect(self.url(), autocommit=True)

    def _as_postgres(self, *argv: str) -> list[str]:
        if os.geteuid() == 0:
            return ["runuser", "-u", "postgres", "--", *argv]
        return list(argv)

    def _run(self, *argv: str) -> None:
        done = subprocess.run(
            self._as_postgres(*argv), capture_output=True, text=True, timeout=120, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed: {done.stdout}{done.stderr}")

    def init(self) -> None:
        self.data.mkdir()
        if os.geteuid() == 0:
            shutil.chown(self.data, "postgres")
        password_file = self.root / "password"
        password_file.write_text(PASSWORD)
        os.chmod(password_file, 0o644)  # read by initdb as the postgres user
        try:
            self._run(
                str(self.bindir / "initdb"), "-D", str(self.data), "-U", "postgres",
                "-A", "scram-sha-256", f"--pwfile={password_file}",
            )  # fmt: skip
        finally:
            password_file.unlink()
        hba = self.data / "pg_hba.conf"
        trusting = (
            "".join(
                f"local {db} +{group} trust\nhost {db} +{group} 127.0.0.1/32 trust\n"
                for db, group in (("all", TRUSTED_ROLE), ("postgres", ELSEWHERE_ROLE))
            )
            + f"host all +{TCP_ROLE} 127.0.0.1/32 trust\n"
        )
        hba.write_text(trusting + hba.read_text())

    def start(self) -> None:
        options = (
            f"-p {self.port} -k {self.data} -c listen_addresses=127.0.0.1"
            f" -c max_connections=200{'' if self.durable else ' -c fsync=off'}"
        )
        self._run(
            str(self.bindir / "pg_ctl"), "-D", str(self.data), "-w", "-l",
            str(self.data / "log"), "-o", options, "start",
        )  # fmt: skip

    def stop(self, mode: str = "fast") -> None:
        """``mode``: ``fast`` (clients disconnected, a clean shutdown) or ``immediate`` (as
        a crash: recovery from the write-ahead log at the next start)."""
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop")

    def new_database(self) -> str:
        """The URL of a new, empty database on the server."""
        import psycopg

        name = f"t{os.getpid()}_{next(self._names)}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def drop_database(self, url: str) -> None:
        """Drop the database of ``url`` (made by :meth:`new_database`), ending any session
        still on it (``WITH (FORCE)``). Nothing is raised where it cannot be dropped (the
        server stopped by its test): it is then removed with the server's files."""
        import psycopg
        from psycopg import sql

        name = url.rsplit("/", 1)[1]
        drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        with (
            contextlib.suppress(psycopg.Error),
            psycopg.connect(self.url(), autocommit=True, connect_timeout=10) as conn,
        ):
            conn.execute(drop)


PORT_TRIES = 5
"""Ports tried before giving up on starting the server (see ``_start_on_a_free_port``)."""


def _start_on_a_free_port(server: PgServer) -> None:
    """Start ``server``, on another free port each time the one it was given was taken
    meanwhile: ``_free_port`` lets its port go before the server binds it, and on a machine
    shared with other test runs (Ray, servers on port 0) another process may bind it first;
    the server then stops at once, "Address already in use" in its log."""
    for _ in range(PORT_TRIES - 1):
        try:
            server.start()
            return
        except RuntimeError:
            log = server.data / "log"
            if "Address already in use" not in log.read_text(errors="replace"):
                raise
            log.unlink()
            server.port = _free_port()
    server.start()


PREFIX = "subagents-pg-"
"""The servers' temporary directories' prefix (in ``tempfile.gettempdir()``)."""
OWNER = "owner.json"
"""The file naming a server directory's owner: ``pid``, ``started`` (its start time, so a
pid taken by another process later is not taken for the owner), ``machine`` (the kernel
boot and pid namespace its pid means something in) and ``bindir``."""

STOP_WAIT_S = 120.0
"""Longest wait for a left server's postmaster to end once told to (``_stop_left``)."""


def _started(pid: int) -> int | None:
    """``pid``'s start time (clock ticks since boot, /proc's stat), None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _machine() -> str | None:
    """Where a pid means something: the kernel boot and this process's pid namespace (two
    containers sharing a temporary directory see each other's pids as other processes, or
    none); None where that cannot be told."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        return f"{boot}|{os.readlink('/proc/self/ns/pid')}"
    except OSError:
        return None


def _own(root: Path, bindir: Path) -> None:
    """Name this process ``root``'s owner (first thing: before a server is there)."""
    pid = os.getpid()
    owner = {"pid": pid, "started": _started(pid), "machine": _machine(), "bindir": str(bindir)}
    (root / OWNER).write_text(json.dumps(owner))


def _owner_alive(owner: dict[str, object]) -> bool:
    """Whether the owner may live: always, unless it is known to be of this boot and pid
    namespace (else its pid means nothing here), with its start time, and its pid is gone or
    another process's."""
    pid, started, machine = owner.get("pid"), owner.get("started"), owner.get("machine")
    if machine is None or machine != _machine() or started is None:
        return True  # (a start time its owner could not read: none to compare)
    return isinstance(pid, int) and pid > 0 and _started(pid) == started


def _postmaster(data: Path) -> int | None:
    """A pidfd of the postmaster serving ``data``, None when none does. The pid its
    ``postmaster.pid`` names is trusted only once a pidfd holds it and its working directory
    is ``data`` (a postmaster's is its data directory): a server killed with its run leaves
    that file behind, and its pid may since be another process's (another run's postmaster:
    ``pg_ctl stop`` would have signalled it)."""
    try:
        pid = int((data / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    if pid <= 0:
        return None
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        return None
    try:
        if os.readlink(f"/proc/{pid}/cwd") == str(data.resolve()):
            return pidfd  # (read after the pidfd was open: it names the same process)
    except OSError:
        pass
    os.close(pidfd)
    return None


def _stop_left(root: Path) -> None:
    """Stop the server of ``root`` if one runs (SIGQUIT to its postmaster, as ``pg_ctl -m
    immediate``; through a pidfd checked to name it: ``_postmaster``), and remove ``root``.
    A postmaster that does not end within ``STOP_WAIT_S`` is left, with its files."""
    data = root / "data"
    pidfd = _postmaster(data)
    if pidfd is not None:
        try:
            signal.pidfd_send_signal(pidfd, signal.SIGQUIT)
            ended, _, _ = select.select([pidfd], [], [], STOP_WAIT_S)
        except OSError:
            ended = [pidfd]  # (gone meanwhile)
        finally:
            os.close(pidfd)
        if not ended:
            return
    shutil.rmtree(root, ignore_errors=True)


def sweep_left(tmp: str | None = None) -> list[Path]:
    """Stop and remove every server a dead run left in ``tmp`` (None: the temporary
    directory); the ones whose owner lives, or that name none, are left. The ones swept."""
    swept = []
    for found in sorted(Path(tmp or tempfile.gettempdir()).glob(f"{PREFIX}*")):
        try:
            mine = found.lstat().st_uid == (found / OWNER).lstat().st_uid == os.geteuid()
            owner = json.loads((found / OWNER).read_text())
        except (OSError, ValueError):
            continue  # no owner named (yet): maybe a live run's
        if not mine or not isinstance(owner, dict) or _owner_alive(owner):
            continue  # (another user's: not ours to judge, nor to remove)
        _stop_left(found)
        swept.append(found)
    return swept


def _watch(root: Path) -> subprocess.Popen[bytes]:
    """The watch of ``root``'s owner (this process): stops and removes its server when this
    process has ended without doing so (see the module)."""
    return subprocess.Popen(
        [sys.executable, __file__, "watch", str(root)],
        start_new_session=True,  # (a kill of the run's group spares it)
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _watching(root: Path) -> None:
    """The watch's body: wait for the owner's end, then sweep ``root`` if it is still there."""
    owner = json.loads((root / OWNER).read_text())
    try:
        pidfd = os.pidfd_open(int(owner["pid"]))
    except ProcessLookupError:
        pidfd = -1
    if pidfd >= 0 and _owner_alive(owner):  # (the pidfd names the owner: it lived after)
        select.select([pidfd], [], [])
    if root.exists():
        _stop_left(root)


def start_server() -> PgServer:
    """A new throwaway server, owned by this process (watched: see the module)."""
    bindir = _binaries()
    assert bindir is not None
    root = Path(tempfile.mkdtemp(prefix=PREFIX))
    os.chmod(root, 0o755)  # the postgres user reaches its data directory through it
    _own(root, bindir)
    server = PgServer(bindir=bindir, root=root, port=_free_port(), watch=_watch(root))
    try:
        server.init()
        _start_on_a_free_port(server)
        with server.admin() as conn:
            for group in (TRUSTED_ROLE, ELSEWHERE_ROLE, TCP_ROLE):
                conn.execute(f'CREATE ROLE "{group}" NOLOGIN')
    except BaseException:
        _stop_left(root)
        raise
    return server


def end_server(server: PgServer) -> None:
    """Stop ``server`` and remove its files, its watch ended (its owner's own end)."""
    with contextlib.suppress(RuntimeError):  # already stopped by a test
        server.stop("immediate")
    shutil.rmtree(server.root, ignore_errors=True)
    if server.watch is not None:
        server.watch.kill()
        server.watch.wait()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """The session's PostgreSQL server (skipped, or failed under CI, where none can run);
    the servers dead runs left are stopped first (``sweep_left``)."""
    require_postgres()
    sweep_left()
    server = start_server()
    try:
        yield server
    finally:
        end_server(server)


@pytest.fixture
def pg_url(pg_server: PgServer) -> Iterator[str]:
    """A fresh database of the session's server, for this test alone, dropped after it.

    Dropped, not left for the session's end: each database is ~8 MB of files, hundreds of
    tests made GBs per worker, and removing them all fell to the teardown of whichever test
    a worker ran last, under that test's own timeout (23 s in a whole run at load ~10; 34
    databases alone took 2.3 s)."""
    url = pg_server.new_database()
    yield url
    pg_server.drop_database(url)


def _open_transactions(database: str) -> int:
    """Sessions of ``database`` other than this one inside a transaction or a statement
    (a stopped host's, here: nothing else is connected then)."""
    import psycopg

    with psycopg.connect(database, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND backend_type = 'client backend' AND pid <> pg_backend_pid()"
            " AND state <> 'idle'"
        ).fetchone()
    return int(row[0]) if row else 0


def stop_outside_a_transaction(where: str | os.PathLike[str] | None, pid: int) -> None:
    """SIGSTOP the host at a moment it holds no transaction open. On PostgreSQL a host
    stopped inside one (a lease renewal, a fenced write) holds its lease row's lock: a
    restore or a stop then takes it for a host writing right now and leaves its runs to it,
    as documented (docs/store.md), until the server's idle-in-transaction timeout (60 s)
    ends it; on SQLite it holds the file's write lock, and every other writer fails after
    its busy timeout. The tests using this are of a host stalled between its writes.
    ``where``: the PostgreSQL URL or the SQLite file the host writes to (None: stopped at
    once)."""
    assert pid > 0, pid
    for _ in range(100):
        os.kill(pid, signal.SIGSTOP)
        _stopped(pid)  # (the signal is delivered later: a thread may still begin a write)
        if where is None or not _inside_a_transaction(where):
            return
        os.kill(pid, signal.SIGCONT)  # inside one: let it finish, stop it again
    raise AssertionError("the host was inside a transaction at each of 100 stops")


def _stopped(pid: int) -> None:
    """Wait until every thread of ``pid`` is stopped (``T`` in /proc's stat): ``kill``
    returns before the kernel has stopped them, and one still running could take the
    store's write lock after the check that found none held (CI, session 26: the taker's
    lease then failed with ``StoreBusy``)."""

    def states() -> list[str]:
        out = []
        for stat in glob.glob(f"/proc/{pid}/task/*/stat"):
            with contextlib.suppress(OSError), open(stat) as f:
                out.append(f.read().rsplit(")", 1)[1].split()[0])
        return out

    from polling import wait_until

    wait_until(
        lambda: all(state in ("T", "t", "Z", "X") for state in states()),
        f"every thread of process {pid} stopped",
        30.0,
    )


def _inside_a_transaction(where: str | os.PathLike[str]) -> bool:
    """Whether another session holds a transaction open on ``where`` (see above)."""
    if str(where).startswith("postgresql://"):
        return _open_transactions(str(where)) > 0
    import sqlite3

    conn = sqlite3.connect(where, timeout=0, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("ROLLBACK")
    except sqlite3.OperationalError:  # database is locked: a writer holds it
        return True
    finally:
        conn.close()
    return False


def waiting_for_a_lock(url: str) -> bool:
    """Whether a session of ``url``'s database waits for a lock another one holds."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
            " WHERE NOT l.granted AND a.datname = current_database()"
        ).fetchone()
    return bool(row and row[0])


def wait_for_lock(url: str, what: str) -> None:
    """Until a session of ``url``'s database waits for a lock (``what``: for the error)."""
    from polling import wait_until

    wait_until(lambda: waiting_for_a_lock(url), what)


if __name__ == "__main__" and sys.argv[1:2] == ["watch"]:
    _watching(Path(sys.argv[2]))
