"""ProcessGroups: every child process the tools start, each in its own process group.

Why a group per command: a shell command starts other processes (a test runner, its
workers, a ``sleep`` in a pipeline). Killing only the shell leaves them running, holding
files and CPU after the run is gone. Each command's shell leads a process group of its own,
so a stop (SIGTERM) reaches everything it started that did not leave the group on purpose.
A daemon does leave it (``setsid``, a double fork, ``nohup``), and may clear its environment
(``env -i``): on Linux the kernel's bookkeeping holds it all the same. Every command runs as
the child of the reaper (``reaper``: a subreaper, the parent of every orphan the command
leaves), which kills all of them when the shell ends (with ``background``: when the runtime
says so) and tells the runtime the shell's end and that all is gone (``Process.contained``);
in the sandbox, where the system allows, as the init of the command's own PID namespace
(``reaper_ns``), whose end the kernel makes the end of everything in it.
The runtime's death, however it dies (SIGKILL included), is a stop to every reaper too: the
status pipe's read end is the runtime's alone, and its close is the reaper's lifeline. The
reaper is not the runtime's child in a cluster's node host (``tools.detached``: a kill of
the host's children, as Ray's of a lost node host's, must not reach it), held by a pidfd;
nor may a sandboxed command signal it (``reaper.scope_signals``).
Where the reaper did not say so (it was killed itself; not Linux) a kill falls back to the
group and to a mark: every command's processes carry a cookie in their environment
(``TREE_COOKIE``, unique per command), which a new session and a fork keep, and whatever
still runs with it is found in Linux's ``/proc`` (``strays.kill_strays``); what clears its
environment escapes that.

The registry is runtime-wide and thread-safe (agents run on several threads): a run's
processes are killed when the run ends (``kill_run``) and every process when the runtime
closes (``kill_all``). Output goes through a pipe to a file, copied by a thread of its own
(``_relay``): a command that prints a lot never blocks on a full pipe while the agent waits,
and the file keeps ``OUTPUT_CAP`` bytes at most: past it the pipe is closed, so the command's
next write gets SIGPIPE (as under ``| head``) and a ``yes`` cannot fill the disk. Only the
head of a command's output is ever shown to the model (``output_files.read_output``), so
nothing is lost to it."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from subagents.models.base import CancelSignal
from subagents.tools import reaper
from subagents.tools.detached import DetachedReaper, detaches, held
from subagents.tools.errors import ToolError
from subagents.tools.group_leader import GroupLeader
from subagents.tools.lease_line import fds_of
from subagents.tools.process import Process, stop_reaper
from subagents.tools.run_starts import RunAttempt, RunEnding, RunStarts
from subagents.tools.sandbox import RunSandbox
from subagents.tools.scratch import RUN_DIR, SCRATCH, make_dir, remove_dir
from subagents.tools.shell_limits import ShellLimits, ShellSlots
from subagents.tools.strays import TREE_COOKIE, kill_strays, start_time

KILL_GRACE_S = 0.5
"""How long a group gets between SIGTERM and SIGKILL."""
POLL_S = 0.05
"""How often a wait looks at the cancel signal (a stop kills the group within this)."""
HELD_WAIT_S = 10.0
"""How long a kill waits for the reaper to end after SIGTERM (its grace, then killing all it
holds: well under a second) before killing it and falling back to the mark; a hang guard."""
DETACH_WAIT_S = 60.0
"""How long a detached launcher's first process gets to fork its reaper and end (at once
when well: a Python start, ~20 ms) before it is killed and the start refused
(``LauncherStuck``); a hang guard against a launcher stopped (``kill -STOP`` by a process of
the same user, a frozen cgroup) or stuck, wide for a loaded machine."""
HOLDS = sys.platform.startswith("linux")
"""Whether commands run under the reaper (``reaper``: Linux only; elsewhere the group alone)."""
REAPER = (
    f"import sys; sys.path.append({os.path.dirname(reaper.__file__)!r}); import reaper;"
    " sys.exit(reaper.main(sys.argv[1:]))"
)
"""The reaper's start (``python -I -S -c``): imported, its compiled form is cached (a
script run by path is compiled at every start)."""
OUTPUT_CAP = 64 * 1024 * 1024
"""Bytes of a command's output kept on disk; past them the rest is dropped (``_relay``)."""


class LauncherStuck(ToolError):
    """A command's launcher did not detach its reaper within ``DETACH_WAIT_S`` (stopped or
    stuck): it was killed, the command with it; the message names the command."""


def shell() -> str:
    """The shell commands run in: bash when there is one (Claude Code's Bash), else sh."""
    return shutil.which("bash") or "/bin/sh"


@dataclass(frozen=True)
class Waited:
    """How a wait ended: ``exit_code`` set when the command ended by itself."""

    exit_code: int | None
    reason: str = "exited"
    """``exited``, ``timeout``, ``cancelled`` or ``deadline``."""


class ProcessGroups:
    """The runtime's child processes, by run; kills what a run or the runtime leaves."""

    def __init__(
        self,
        output_cap: int = OUTPUT_CAP,
        scratch_root: Path | None = None,
        shell_limits: ShellLimits | None = None,
    ) -> None:
        self.output_cap = output_cap
        """Bytes of a command's output kept in its file (``OUTPUT_CAP``)."""
        self.scratch_root = scratch_root
        """Where the output files' directory is made (None: the system's temporary one)."""
        self._lock = threading.Lock()
        self._listed = threading.Condition(self._lock)
        """Notified when a starting command is listed (or failed): a run's end waits on it."""
        self._starts = RunStarts()
        self._live: dict[str, Process] = {}
        self._seq = 0
        self._dir: Path | None = None
        self._closed = False
        self._leftovers: dict[str, list[Process]] = {}
        """By run: forgotten processes never reaped (a background shell that ended, read by
        BashOutput; its reaper holds its daemons): what they left dies with the run."""
        self.lease_env: dict[str, str] = {}  # the lease line's descriptor (``tools.lease_line``)
        self.shells = ShellSlots(shell_limits or ShellLimits())
        """The background shells holding a slot: how many a run, and all, may hold."""

    def scratch(self) -> Path:
        """A private directory for output files (made on first use, removed on close)."""
        if self._closed:
            raise RuntimeError("the runtime is closed: no process may start")
        self._dir = self._dir or make_dir(SCRATCH, self.scratch_root)  # in the user's home
        return self._dir

    def run_dir(self, run_id: str) -> Path:
        """The run's own temporary directory (its processes' ``TMPDIR``, writable in its
        sandbox; their output files too, written by ``_relay``: a command's own output is a
        pipe, so ``> /dev/stderr`` works): made on first use, removed when the run ends
        (``kill_run``)."""
        path = self.scratch() / f"{RUN_DIR}{_safe(run_id)}"
        path.mkdir(mode=0o700, exist_ok=True)
        return path

    def start(
        self,
        command: str,
        *,
        cwd: Path,
        run_id: str,
        env: Mapping[str, str] | None = None,
        prefix: str = "bash",
        sandbox: RunSandbox | None = None,
        background: bool = False,
        cancel: CancelSignal | None = None,
        attempt: RunAttempt | None = None,
    ) -> Process:
        """Start ``command`` in a shell, in a new process group (under ``sandbox``: see
        ``tools.sandbox``), held by the reaper (``reaper``; with ``background``, what it
        leaves may outlive its shell until it is killed); its output to a file.
        ``SandboxRefused`` when it may not start; ``ShellLimitReached`` when a background
        shell would pass its run's or the runtime's limit (``ShellLimits``); ``RunEnding``
        while the run's end (``kill_run``) is under way, or once ``cancel`` (the run's stop,
        set before its end begins) is set: a tool call still going when its run was stopped
        must not start a shell after the end has listed and killed the run's; or once
        ``attempt`` (the start of the run it belongs to) has ended (``end_attempt``: a run
        that ended by itself has no cancel set). ``run_id`` is the key its processes are
        listed under: a run's id, or one attempt's (``RunAttempt.key``). The status
        pipe's read end is the reaper's lifeline (closed by the runtime's death, it stops the
        reaper): close-on-exec from birth (``os.pipe``: pipe2, atomic against other threads'
        forks), never passed on."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the runtime is closed: no process may start")
            if cancel is not None and cancel.is_set():  # under the lock: after ``kill_run``
                raise RunEnding(f"run {run_id} was stopped: no command may start")
            if attempt is not None and attempt.ended:  # under the lock ``end_attempt`` takes
                raise RunEnding(f"run {attempt.run_id} has ended: no command may start")
            self._starts.begin(run_id)  # RunEnding: its end is under way (``kill_run``)
            self._seq += 1
            proc_id = f"{prefix}_{self._seq}"
            try:
                if background:
                    self.shells.admit(proc_id, run_id)
            except BaseException:
                self._starts.done(run_id)
                raise
        try:
            return self._start(proc_id, command, cwd, run_id, env, sandbox, background)
        except BaseException:
            with self._lock:
                self.shells.failed(proc_id)
            raise
        finally:
            with self._lock:
                self._starts.done(run_id)  # listed in ``_live`` by now, or failed
                self._listed.notify_all()

    def _start(
        self,
        proc_id: str,
        command: str,
        cwd: Path,
        run_id: str,
        env: Mapping[str, str] | None,
        sandbox: RunSandbox | None,
        background: bool,
    ) -> Process:
        with self._lock:
            run_dir = self.run_dir(run_id)
        status, told = os.pipe() if HOLDS else (-1, -1)
        detach = told >= 0 and detaches()
        try:
            flags = [*(["--linger"] if background else []), *(["--detach"] if detach else [])]
            reap = ["--status-fd", str(told), *flags] if told >= 0 else []
            argv = held_argv([shell(), "-c", command], run_dir, sandbox, reap)
        except BaseException:
            _close(status, told)
            raise
        # a fresh file of an unpredictable name (O_EXCL, never through a symlink): the run's
        # own commands may write in its directory, and must not plant a link this process
        # (unsandboxed) would then write a command's output through
        fd, name = tempfile.mkstemp(prefix=f"{proc_id}-", suffix=".out", dir=run_dir)
        output = Path(name)
        cookie = f"{proc_id}-{secrets.token_hex(8)}"
        environment = {**(env if env is not None else os.environ), TREE_COOKIE: cookie}
        environment.pop(reaper.LEASE_VARIABLE, None)  # only this runtime's own line (below)
        source, pipe = os.pipe()
        try:
            popen = subprocess.Popen(
                argv,
                cwd=cwd,
                env=environment | self.lease_env,
                stdin=subprocess.DEVNULL,
                stdout=pipe,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                pass_fds=((told,) if told >= 0 else ()) + fds_of(self.lease_env),
            )
        except BaseException:
            _close(source, fd, status)
            raise
        finally:
            _close(pipe, told)
        leader = GroupLeader.of(popen)  # before anything waits: the pid is still its own
        started = Process(
            proc_id, command, run_id, popen, output, cookie=cookie, status_fd=status, leader=leader
        )
        process = self._held(started, detach, source, fd)
        _start_relay(source, fd, self.output_cap, process)
        with self._lock:
            self._live[proc_id] = process
            if background:
                self.shells.started(process)
            closed = self._closed
        if closed:  # closed while it started: it must not outlive the runtime
            self.kill(process, "runtime closed")
        return process

    def _held(self, started: Process, detach: bool, source: int, fd: int) -> Process:
        """``_holding``: detached, up to ``DETACH_WAIT_S``, unless the run's end cuts its
        launcher first (``kill_run``)."""
        launcher = self._launching(started.run_id, started.popen, started.cookie) if detach else -1
        try:
            return _holding(started, detach, source, fd)
        finally:
            if launcher >= 0:
                with self._lock:
                    self._starts.launched(launcher)
                os.close(launcher)

    def _launching(self, run_id: str, popen: subprocess.Popen[bytes], cookie: str) -> int:
        """A pidfd of ``popen``, a launcher about to detach its reaper, listed for its run's
        end to cut (``kill_run``); -1 when none can be opened (EMFILE: its start is then
        waited for, bounded by ``DETACH_WAIT_S``). Opened before it is waited for: the pid
        is still our child's, so the pidfd names it, and never another process after."""
        try:
            launcher = os.pidfd_open(popen.pid)
        except OSError:
            return -1
        since = start_time(str(popen.pid))
        with self._lock:
            self._starts.launching(launcher, run_id, cookie, since, cut=self._closed)
        return launcher

    def wait(
        self,
        process: Process,
        *,
        timeout: float,
        cancel: CancelSignal,
        deadline: float,
    ) -> Waited:
        """Wait for ``process`` to end, ``timeout`` seconds at most, returning early (and
        killing its group) when ``cancel`` is set or the run's ``deadline`` passes."""
        until = time.monotonic() + timeout
        while True:
            now = time.monotonic()
            if cancel.is_set():
                self.kill(process, "cancelled")
                return Waited(None, "cancelled")
            if now >= deadline:
                self.kill(process, "deadline")
                return Waited(None, "deadline")
            if now >= until:
                self.kill(process, "timeout")
                return Waited(None, "timeout")
            try:
                code = process.wait(min(POLL_S, until - now, deadline - now))
            except subprocess.TimeoutExpired:
                continue
            self._reap_left(process)  # what it left behind goes with it
            self._forget(process)
            process.drained.wait(KILL_GRACE_S)  # the last of its output into the file
            return Waited(code, "exited")  # the reaper ends as its shell did

    def kill(self, process: Process, reason: str) -> None:
        """Kill all ``process`` started: ``stop_reaper`` (SIGTERM to the reaper, which gives
        the shell a short grace, then kills everything it holds), then what it left if it
        did not say all is gone (``_reap_left``: SIGKILL, and its mark's strays)."""
        if process.killed is None:
            process.killed = reason
        if process.poll() is None:  # (SIGKILL, if it did not end, again by ``_reap_left``)
            grace = HELD_WAIT_S if process.status_fd >= 0 else KILL_GRACE_S
            stop_reaper(process.signal_reaper, process.ended_within, grace, 0)
        self._reap_left(process)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(KILL_GRACE_S)
        self._forget(process)
        process.drained.wait(KILL_GRACE_S)

    def _reap_left(self, process: Process) -> None:
        """Kill what ``process`` left: nothing when its reaper ended having killed it all
        (its group's id, its pid, may already name another's); else its group and the
        processes carrying its mark (no reaper, or one killed: ``strays.kill_strays``)."""
        if not process.contained():
            process.signal_reaper(signal.SIGKILL)
            kill_strays(process.cookie, process.since)
        process.reaped = True

    def _forget(self, process: Process) -> None:
        with self._lock:
            if self._live.get(process.id) is process and process.poll() is not None:
                del self._live[process.id]

    def get(self, run_id: str, proc_id: str) -> Process | None:
        """A live (or ended, not yet forgotten) process of ``run_id``."""
        with self._lock:
            process = self._live.get(proc_id)
        return process if process is not None and process.run_id == run_id else None

    def shell(self, run_id: str, proc_id: str) -> Process | None:
        """A background shell of ``run_id`` known here (``get``), or one forgotten whose
        reaper may still run (its output read; a daemon it left): KillShell frees its slot."""
        with self._lock:
            process = self._live.get(proc_id) or self.shells.get(proc_id)
        return process if process is not None and process.run_id == run_id else None

    def track(self, process: Process) -> None:
        """Keep an ended background process until its output has been read."""
        with self._lock:
            self._live.setdefault(process.id, process)

    def release(self, process: Process) -> None:
        """Forget an ended process and delete its output file; what it left running (a
        background shell's daemon) is still killed when its run ends (``kill_run``)."""
        with self._lock:
            if self._live.get(process.id) is process:
                del self._live[process.id]
                if not process.reaped:
                    self._leftovers.setdefault(process.run_id, []).append(process)
        with contextlib.suppress(OSError):
            process.output.unlink()

    def of_run(self, run_id: str) -> list[Process]:
        with self._lock:
            return [p for p in self._live.values() if p.run_id == run_id]

    def end_attempt(self, attempt: RunAttempt, reason: str = "run ended") -> int:
        """``attempt`` ended (stopped, or by itself): kill its processes (``kill_run`` of its
        key), and refuse, for good, every start of it after (a tool call still going)."""
        with self._lock:
            attempt.ended = True
        return self.kill_run(attempt.key, reason)

    def kill_run(self, run_id: str, reason: str = "run ended") -> int:
        """Kill every process ``run_id`` still has; how many were running. No command of the
        run starts meanwhile (``RunStarts``), and those starting are waited for, then killed;
        a detached launcher still starting is killed first (``RunStarts.cut``), so that a stop
        never waits on one stopped or stuck (``DETACH_WAIT_S``: a cluster's node host held a
        run's stop up to ~70 s so)."""
        with self._lock:
            self._starts.end(run_id)
        self._cut(run_id)
        with self._lock:
            while self._starts.starting(run_id):  # each bounded: a Popen, a cut launcher's end
                self._listed.wait()
        try:
            return self._kill_run(run_id, reason)
        finally:
            with self._lock:
                self._starts.ended(run_id)

    def _cut(self, run_id: str | None) -> None:
        """Kill the launchers of ``run_id`` (None: every run's) still detaching, so that an end
        waits on none stopped or stuck (``RunStarts.cut``), and a reaper one forked already,
        stuck before it said its pid, by its command's mark."""
        with self._lock:
            marks = self._starts.cut(run_id)
        for cookie, since in marks:
            kill_strays(cookie, since)

    def _kill_run(self, run_id: str, reason: str) -> int:
        running = 0
        for process in self.of_run(run_id):
            if process.poll() is None:
                running += 1
            self.kill(process, reason)
            self.release(process)
        with self._lock:
            leftovers = self._leftovers.pop(run_id, [])
            self.shells.forget_run(run_id)
        for process in leftovers:
            self.kill(process, reason)
        if self._dir is not None:
            shutil.rmtree(self._dir / f"{RUN_DIR}{_safe(run_id)}", ignore_errors=True)
        return running

    def kill_all(self, reason: str = "runtime closed") -> None:
        """Kill every process and remove the output files; nothing starts after."""
        with self._lock:
            self._closed = True
            processes = list(self._live.values())
            self._live.clear()
            processes += [p for left in self._leftovers.values() for p in left]
            self._leftovers.clear()
            self.shells.clear()
        self._cut(None)  # a node host's close waits on no launcher stopped or stuck
        for process in processes:
            self.kill(process, reason)
        if self._dir is not None:
            remove_dir(self._dir)  # (and its lock: ``tools/held_dirs.py``)

    def live_count(self) -> int:
        with self._lock:
            return sum(1 for p in self._live.values() if p.poll() is None)


def held_argv(
    argv: list[str], temp_dir: Path, sandbox: RunSandbox | None, reap: Sequence[str]
) -> list[str]:
    """``argv`` as started: under ``sandbox``'s launcher (``SandboxRefused`` when it may not
    start; None: no sandbox), held by the reaper given ``reap`` (its flags: ``--status-fd N``
    or ``--status-path P``, ``--linger``, ``--detach``; empty: not held, where there is no
    reaper, off Linux). Bash commands, hooks and stdio MCP servers (``tools/held.py``) alike.
    Unsandboxed, ``argv[0]`` must be a path: the reaper runs it as it is (the sandbox's
    launcher looks it up in ``PATH``)."""
    if sandbox is not None and sandbox.landlock:  # (a PID namespace: in the sandbox only)
        return sandbox.argv(argv, temp_dir, list(reap))
    if sandbox is not None:
        sandbox.argv(argv, temp_dir)  # its refusal, if any
    return [sys.executable, "-I", "-S", "-c", REAPER, *reap, "--", *argv] if reap else argv


def _holding(process: Process, detach: bool, *spare: int) -> Process:
    """``process`` just started: when its launcher started (read before it is waited for:
    its stat is still there), its reaper held when detached, its status pipe non-blocking.
    When it cannot be held (no pidfd: EMFILE), ``spare`` and the status pipe are closed (the
    reaper's lifeline: it stops its command) and the output file removed, and it raises."""
    process.since = start_time(str(process.popen.pid))
    if detach:
        try:
            process.detached, process.said = _detached(process)
        except BaseException:
            _close(*spare, process.status_fd)
            process.output.unlink(missing_ok=True)
            raise
    if process.status_fd >= 0:
        os.set_blocking(process.status_fd, False)
    return process


def _detached(process: Process) -> tuple[DetachedReaper | None, bytes]:
    return detached_reaper(process.popen, process.status_fd, process.command)


def detached_reaper(
    popen: subprocess.Popen[bytes], status_fd: int, command: str
) -> tuple[DetachedReaper | None, bytes]:
    """The detached reaper of ``popen`` (its launcher's first process, which ends as soon
    as it has forked it) and what it said after its pid on ``status_fd``; None when the
    launcher ended without detaching (it failed first: its own exit code says how). A reaper
    that never said its pid was killed first: it is known as ended (having said nothing).
    A first process that does not end, or a reaper that does not say its pid, within
    ``DETACH_WAIT_S`` is killed, and ``LauncherStuck`` raised, naming ``command`` (the
    caller closes the status pipe: a reaper forked already loses its lifeline and stops
    the command). Bash's commands and hooks' alike."""
    until = time.monotonic() + DETACH_WAIT_S
    try:
        code = popen.wait(DETACH_WAIT_S)
        found = held(status_fd, until - time.monotonic()) if code == 0 else None
    except (subprocess.TimeoutExpired, TimeoutError):
        popen.kill()  # our child (if not ended: its pid is still its own until waited for)
        with contextlib.suppress(subprocess.TimeoutExpired):
            popen.wait(HELD_WAIT_S)
        raise LauncherStuck(
            f"the launcher of {command!r} did not start it within {DETACH_WAIT_S:g} s"
            " (stopped, or stuck): killed, or its reaper cut off (it stops all when it runs)"
        ) from None
    if code != 0:
        return None, b""
    return found if found is not None else (DetachedReaper(popen.pid, -1), b"")


def _close(*fds: int) -> None:
    for fd in fds:
        if fd >= 0:
            os.close(fd)


def _safe(run_id: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in run_id)


def _start_relay(source: int, sink: int, cap: int, process: Process) -> None:
    """Start ``process``'s output relay; when no thread can start, the command is killed (it
    must not run unwatched, its output unread) and the error raised."""
    relay = threading.Thread(target=_relay, args=(source, sink, cap, process), daemon=True)
    try:
        relay.start()
    except BaseException:
        process.signal_reaper(signal.SIGKILL)
        process.wait(HELD_WAIT_S)
        for end in (source, sink):
            os.close(end)
        process.output.unlink(missing_ok=True)
        raise


def _relay(source: int, sink: int, cap: int, process: Process) -> None:
    """Copy ``process``'s output from its pipe (``source``) to its file (``sink``), ``cap``
    bytes at most. Past the cap, or when the file cannot be written (a full disk: ``cut``
    says why), the pipe is closed and ``dropped`` set (the model is told): the command's
    next write gets SIGPIPE, and nothing more is read or kept. A program that ignores
    SIGPIPE gets EPIPE instead, and one that also ignores EPIPE writes on to nowhere until
    its timeout or its run's end, as it would into ``| head``: the pipe is not drained for
    it (that would keep a ``yes`` alive for ever), nor its group killed (that would kill a
    program that handles EPIPE, and whatever else runs in its group, for printing much)."""
    kept = 0
    try:
        while chunk := os.read(source, 65536):
            if kept + len(chunk) > cap:
                _write_all(sink, chunk[: cap - kept])
                process.dropped = True
                return
            _write_all(sink, chunk)
            kept += len(chunk)
    except OSError as exc:
        process.cut = f"{exc.strerror or exc} after {kept} bytes"
        process.dropped = True
        return
    finally:
        os.close(source)
        os.close(sink)
        process.drained.set()


def _write_all(sink: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(sink, view) :]
