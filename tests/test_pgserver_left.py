"""A killed test run's throwaway PostgreSQL server is stopped (``tests/pgserver.py``): by its
watch when the run's process dies, else by the next run's sweep; a live run's is never.

Why: the server was stopped only at the session's end, so a killed run left it running for
good (a newcomer found two, session 31). Here a real run's stand-in (a process that starts a
server as the session fixture does) is SIGKILLed."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pgserver
from pgserver import PgServer
from polling import wait_until

HERE = Path(__file__).parent

A_RUN = f"""
import sys
sys.path.insert(0, {str(HERE)!r})
from pgserver import start_server
server = start_server()
assert server.watch is not None
print(server.root, server.watch.pid, flush=True)
sys.stdin.read()  # (until killed)
"""


def _a_run() -> tuple[subprocess.Popen[str], Path, int, int]:
    """A run holding a server of its own: its process, the server's root, the watch's pid
    and the server's (postmaster's) pid."""
    run = subprocess.Popen(
        [sys.executable, "-c", A_RUN], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert run.stdout is not None
    root, watch = run.stdout.readline().split()
    postmaster = int((Path(root) / "data" / "postmaster.pid").read_text().split()[0])
    return run, Path(root), int(watch), postmaster


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not: the watch is its run's child, unreaped)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _killed(run: subprocess.Popen[str]) -> None:
    run.kill()
    run.wait()


def test_a_killed_runs_server_is_stopped_by_its_watch(pg_server: PgServer) -> None:
    """Failed before the fix: nothing stopped it (the server ran on after its run)."""
    run, root, _watch, postmaster = _a_run()
    assert _alive(postmaster)
    _killed(run)
    wait_until(lambda: not _alive(postmaster) and not root.exists(), "the server stopped")


def test_a_server_whose_watch_died_too_is_swept_by_the_next_run_and_a_live_ones_never(
    pg_server: PgServer,
) -> None:
    run, root, watch, postmaster = _a_run()
    try:
        here = tempfile.gettempdir()
        assert root not in pgserver.sweep_left(here)  # its owner lives
        assert pg_server.root not in pgserver.sweep_left(here)  # (this session's own)
        assert _alive(postmaster)
        os.kill(watch, signal.SIGKILL)
        wait_until(lambda: not _alive(watch), "the watch killed")
        _killed(run)
        assert _alive(postmaster) and root.exists()  # left running: nothing watches it now
        assert root in pgserver.sweep_left(here)
        assert not _alive(postmaster) and not root.exists()
        with pg_server.admin() as conn:  # this session's server was spared
            assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        _killed(run)
        pgserver.sweep_left()


def test_a_left_postmaster_pid_now_anothers_is_never_signalled(pg_server: PgServer) -> None:
    """A server killed with its run leaves ``postmaster.pid`` behind, and its pid may since be
    another process's (another run's postmaster): the sweep signals only a process whose
    working directory is that server's data directory. Failed before the fix (``pg_ctl
    stop`` signalled the pid it read: here a stand-in, killed by its SIGQUIT)."""
    other = subprocess.Popen(
        ["sleep", "600"],  # (running once Popen returns: it waits for the exec)
        cwd="/",
        user="postgres" if os.geteuid() == 0 else None,  # (as a postmaster would be)
    )
    swept = Path(tempfile.mkdtemp())  # (a folder the postgres user reaches, as /tmp)
    os.chmod(swept, 0o755)
    try:
        root = Path(tempfile.mkdtemp(prefix=pgserver.PREFIX, dir=swept))
        os.chmod(root, 0o755)
        gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True, check=True)  # fmt: skip
        dead = int(gone.stdout)
        (root / pgserver.OWNER).write_text(
            json.dumps({"pid": dead, "started": -1, "machine": pgserver._machine(),
                        "bindir": str(pgserver._binaries())})
        )  # fmt: skip
        (root / "data").mkdir()
        (root / "data" / "PG_VERSION").write_text("15\n")
        (root / "data" / "postmaster.pid").write_text(f"{other.pid}\n{root / 'data'}\n")
        assert pgserver.sweep_left(str(swept)) == [root]
        assert not root.exists()
        assert other.poll() is None  # never signalled
    finally:
        other.kill()
        other.wait()
        shutil.rmtree(swept, ignore_errors=True)
