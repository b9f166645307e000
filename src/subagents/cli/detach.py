"""`subagents run --detach`: the tree runs in a background host process.

Why a fork and not a new command line: by the time `--detach` is acted on, the options are
parsed and checked and the task is read (from stdin too), and no thread has started yet; the
child carries on from exactly there, as the `run` the user typed, in a session of its own (so
closing the terminal does not end it: no SIGHUP), with stdin on /dev/null and its output in a
private log file beside the store (``hosts/RUN.log``). It reports the root's run id through a
pipe once the run is admitted; the parent prints it and exits 0. A run that is refused (an
unknown agent) reports nothing: the parent relays the child's error and exit code, and
removes the log and the folders it made for it (each only while empty); the host took back
the store it made, as any refused run does (``cli.fresh_store``).

From then on the tree is like any other: `ps`, `log`, `attach`, `wait`, `stop`, `send` reach it
through the store, its lease says whether its host lives, and `resume` takes it up if the host
dies. POSIX only (``os.fork``).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import traceback
from collections.abc import Callable
from pathlib import Path

from subagents.cli.fresh_store import remove_made_folders, top_missing
from subagents.cli.state import EXIT_FAILED, CliError
from subagents.store.paths import HOSTS_DIR


class Detached:
    """What the parent learns: the root's run id, the host's pid, its log file."""

    def __init__(self, run_id: str, pid: int, log: Path) -> None:
        self.run_id = run_id
        self.pid = pid
        self.log = log


def detach(state_dir: Path, host: Callable[[Callable[[str], None]], int]) -> Detached | int:
    """Fork a background host that runs ``host(report)`` (``report(run_id)`` once the root is
    admitted) and exits with its code. In the parent: the ``Detached`` host once it reported,
    or the child's exit code when it ended without reporting (its error relayed to stderr)."""
    if not hasattr(os, "fork"):
        raise CliError("--detach needs os.fork (Linux, macOS); run it without --detach", 2)
    if threading.active_count() > 1:  # forking a process with threads copies their locks
        raise CliError("--detach: internal error: threads started before the fork")
    folder = state_dir / HOSTS_DIR
    made = top_missing(folder)  # what a refusal takes back (with the store, in the host)
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    read_end, write_end = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the host: never returns
        os.close(read_end)
        _become_host(folder, write_end, host)
    os.close(write_end)
    with os.fdopen(read_end, "r", encoding="utf-8") as pipe:
        run_id = pipe.read().strip()
    log = folder / (f"{run_id}.log" if run_id else f"host-{pid}.log")
    if run_id:
        return Detached(run_id, pid, log)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    try:
        sys.stderr.write(log.read_text(encoding="utf-8", errors="replace"))
        log.unlink()
    except OSError:
        pass
    if made is not None:  # a refused run leaves none of the folders made for it
        remove_made_folders(folder, made)
    return code if code != 0 else EXIT_FAILED


def _become_host(
    folder: Path, write_end: int, host: Callable[[Callable[[str], None]], int]
) -> None:
    code = EXIT_FAILED
    try:
        os.setsid()  # a session of its own: the terminal's hang-up and Ctrl-C do not reach it
        log = folder / f"host-{os.getpid()}.log"
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(null)
        os.close(fd)
        reported = False

        def report(run_id: str) -> None:
            nonlocal reported
            if reported:
                return
            reported = True
            with contextlib.suppress(OSError):
                os.replace(log, folder / f"{run_id}.log")
            os.write(write_end, f"{run_id}\n".encode())
            os.close(write_end)

        code = host(report)
    except BaseException:
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)
