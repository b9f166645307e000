"""The sandbox of the processes tools start, and the environment they get.

Why: the permission decisions read a command line, and a command line can lie
(``GIT_EXTERNAL_DIFF=x git diff``, ``PATH=./bin:$PATH cat f``, ``./bin/cat``): what a
command judged read-only runs is decided by files and variables the decision never sees. So
every process a tool starts for a run (Bash, background shells, hooks, stdio MCP servers) is
started through the launcher (``sandbox_exec``), which puts it under Linux Landlock before
it runs: it may write only under the run's workspace (its worktree when isolated) and a
private temporary directory of the run, or, when the run is read-only (``plan`` mode), only
under that temporary directory; and, with the network off, it may open no TCP connection.
Reads are not restricted unless the owner lists what may be read (``Sandbox(readable=...)``).
What Landlock does not cover (file metadata, UDP and unix sockets, other processes,
capabilities) the launcher adds with seccomp and a capability drop (``sandbox_syscalls``).
The kernel holds the line for the process and everything it starts.

And a process gets a scrubbed environment (``tool_environment``): a documented allowlist of
variables, plus what the owner names (``Runtime(tool_env=...)``); never the runtime's API keys.

Where the kernel has no Landlock, a read-only run's processes are refused (``RunSandbox.
refusal``), and elsewhere they run unsandboxed after a warning (``Sandbox.resolve``): never
a silent downgrade.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from subagents.definitions.validate import NETWORK_SETTINGS
from subagents.logs import get_logger
from subagents.tools import sandbox_exec, sandbox_shm, scratch
from subagents.tools.errors import ToolError
from subagents.tools.modes import parse_mode
from subagents.tools.sealed import SealedFiles

log = get_logger("subagents.sandbox")

Network = Literal["on", "off"]
assert set(NETWORK_SETTINGS) == {"on", "off"}, "the definitions checker knows the same values"
DEFAULT_NETWORK: Mapping[str, Network] = {"plan": "off"}
"""The network per permission mode when the owner says nothing: off in ``plan`` mode, on
in every other."""
ENV_ALLOWLIST = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "TERM",
    "COLORTERM",
    "NO_COLOR",
    "TZ",
)
"""The variables of the runtime's environment its tools' processes get (with every ``LC_*``);
``CLAUDE_PROJECT_DIR`` (the workspace) and ``TMPDIR`` (the run's own temporary directory)
are set; anything else only when the owner names it (``tool_env``)."""
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def tool_env_of(
    value: Iterable[str] | Mapping[str, str] | None,
) -> tuple[tuple[str, str | None], ...]:
    """``Runtime(tool_env=...)`` read: names (their value taken from the runtime's
    environment when a process starts) or ``{name: value}``; ``NAME=value`` text works too.
    ``ValueError`` names a bad entry."""
    if value is None:
        return ()
    if isinstance(value, str):
        raise TypeError(f"tool_env must be a list of variable names or a mapping, got {value!r}")
    pairs: list[tuple[str, str | None]] = []
    items = value.items() if isinstance(value, Mapping) else ((v, None) for v in value)
    for name, given in items:
        if not isinstance(name, str):
            raise TypeError(f"tool_env: a variable name must be text, got {name!r}")
        if given is None and "=" in name:
            name, given = name.split("=", 1)
        if not _NAME.match(name):
            raise ValueError(f"tool_env: {name!r} is not an environment variable name")
        if given is not None and not isinstance(given, str):
            raise TypeError(f"tool_env: the value of {name} must be text, got {given!r}")
        pairs.append((name, given))
    return tuple(pairs)


def tool_environment(
    base: Mapping[str, str],
    tool_env: Iterable[tuple[str, str | None]],
    *,
    workspace: Path,
    temp_dir: Path | None,
) -> dict[str, str]:
    """The environment of a tool's process: the allowlist of ``base``, the owner's
    ``tool_env``, the workspace and the run's temporary directory."""
    env = {k: v for k, v in base.items() if k in ENV_ALLOWLIST or k.startswith("LC_")}
    for name, given in tool_env:
        if given is not None:
            env[name] = given
        elif name in base:
            env[name] = base[name]
    env["CLAUDE_PROJECT_DIR"] = str(workspace)
    if temp_dir is not None:
        env["TMPDIR"] = str(temp_dir)
    return env


def _directory(path: object) -> str:
    """An owner's extra writable directory: an existing one, absolute (``~`` expanded)."""
    if not isinstance(path, str | os.PathLike):
        raise TypeError(f"Sandbox(writable=...): a directory path, got {path!r}")
    real = os.path.realpath(os.path.expanduser(os.fspath(path)))
    if not os.path.isdir(real):
        raise ValueError(f"Sandbox(writable=...): {os.fspath(path)!r} is not a directory")
    return real


def parse_network(value: object, where: str) -> Network:
    """``on``/``off`` (YAML's ``true``/``false``, which ``on``/``off`` read as, too)."""
    if value is True or value is False:
        return "on" if value else "off"
    if isinstance(value, str) and value.strip().lower() in NETWORK_SETTINGS:
        return "on" if value.strip().lower() == "on" else "off"
    raise ValueError(f"{where}: network must be 'on' or 'off', got {value!r}")


@dataclass(frozen=True)
class Sandbox:
    """The owner's sandbox settings (``Runtime(sandbox=..., tool_env=...)``), resolved once:
    whether it is on, the network per mode, the variables passed on, the Landlock ABI."""

    enabled: bool = True
    network: Mapping[str, Network] = field(default_factory=lambda: dict(DEFAULT_NETWORK))
    """Permission mode -> ``on``/``off``; a mode not named is ``on``."""
    tool_env: tuple[tuple[str, str | None], ...] = ()
    abi: int | None = None
    """The Landlock ABI (``resolve`` asks the kernel, or ``$SUBAGENTS_LANDLOCK_ABI``)."""
    writable: tuple[str, ...] = ()
    """More directories the processes of runs that may write can write (a cache under the
    home directory, say): the owner's choice; never in a read-only run."""
    readable: tuple[str, ...] | None = None
    """None: reads are not restricted. Else processes may read (and run) only under these
    paths, the system's (``SYSTEM_READABLE``), the workspace and what they may write: how
    the owner hides the rest (``~/.ssh``...)."""
    private_shm: bool | None = None
    """Whether each sandboxed command gets a ``/dev/shm`` of its own, which it may write
    (``multiprocessing``, POSIX semaphores): None asks the system, once per process, when
    the first process is to start (``private_shm_refusal``); False keeps the machine's,
    unwritable."""
    shm_size: int = sandbox_shm.SIZE
    """The bound of each command's own ``/dev/shm``, in bytes: a write past it fails with
    ``ENOSPC`` (no space left on device) rather than taking the machine's memory."""
    hidden: tuple[str, ...] = ()
    """Files no sandboxed command may read (the run store's, set by the runtime:
    ``hiding``), covered in each command's own mount namespace (``sandbox_shm.hide``)
    where it gets one (``private_shm``)."""

    @classmethod
    def coerce(
        cls,
        value: bool | Sandbox | None,
        tool_env: Iterable[str] | Mapping[str, str] | None = None,
    ) -> Sandbox:
        """``Runtime(sandbox=True|False|Sandbox(...), tool_env=...)`` as a resolved Sandbox."""
        if value is None or isinstance(value, bool):
            made = cls(enabled=value is not False)
        elif isinstance(value, Sandbox):
            made = value
        else:
            raise TypeError(f"sandbox must be True, False or a Sandbox, got {value!r}")
        network: dict[str, Network] = {
            parse_mode(mode, "Sandbox(network=...)"): parse_network(
                setting, f"Sandbox(network=...) for {mode!r}"
            )
            for mode, setting in made.network.items()
        }
        pairs = made.tool_env + tool_env_of(tool_env)
        extra = tuple(_directory(p) for p in made.writable)
        readable = made.readable
        if readable is not None:
            if isinstance(readable, str):
                raise TypeError("Sandbox(readable=...) is a list of paths, not one string")
            readable = tuple(os.path.realpath(os.path.expanduser(str(p))) for p in readable)
        shm_size = made.shm_size
        if isinstance(shm_size, bool) or not isinstance(shm_size, int) or shm_size <= 0:
            raise ValueError(f"Sandbox(shm_size=...): a number of bytes above 0, got {shm_size!r}")
        made = cls(
            made.enabled, network, pairs, made.abi, extra, readable, made.private_shm, shm_size
        )
        return made.resolve()

    def resolve(self) -> Sandbox:
        """This, with the ABI asked of the kernel; a warning when it is on and there is none."""
        if self.abi is not None:
            return self
        abi = sandbox_exec.landlock_abi() if self.enabled else 0
        if self.enabled and abi == 0:
            log.warning(
                "the kernel offers no Landlock: tools' processes run without the sandbox, and"
                " Bash, hooks and MCP servers of read-only (plan mode) runs are refused",
                platform=sys.platform,
            )
        elif self.enabled and abi < 4:
            log.warning("this kernel's Landlock cannot turn the network off: it stays on", abi=abi)
        return dataclasses.replace(self, abi=abi)

    def hiding(self, sealed: SealedFiles | None) -> Sandbox:
        """This, its commands kept from reading the run store's files (``sealed``)."""
        if sealed is None:
            return self
        files = tuple(str(sealed.directory / name) for name in sealed.files)
        return dataclasses.replace(self, hidden=files)

    def network_for(self, mode: str, wanted: str | None) -> bool:
        """Whether a run in ``mode`` whose definition says ``wanted`` may use the network: a
        definition can turn it off, never on where the owner's setting for the mode is off."""
        if wanted is not None and parse_network(wanted, "network") == "off":
            return False
        return self.network.get(mode, "on") == "on"

    def for_run(
        self, *, workspace: Path, read_only: bool, network: bool, why: str = ""
    ) -> RunSandbox:
        """How one run's processes start: what they may write, the network, the environment."""
        git = git_dirs_of_worktree(workspace)
        writable: tuple[Path, ...] = ()
        if not read_only:
            writable = (workspace, *git, *(Path(p) for p in self.writable))
        landlock = self.enabled and bool(self.abi)
        shm = self.private_shm
        if shm is None:
            shm = landlock and private_shm_refusal() is None
        readable = None
        if self.readable is not None:
            shared = {d.parent for d in git[1:]}  # the repository's git dir: config, HEAD
            given = (Path(p) for p in (*SYSTEM_READABLE, *self.readable))
            readable = (*given, workspace, *git, *sorted(shared))
        return RunSandbox(
            landlock=landlock,
            abi=self.abi or 0,
            writable=writable,
            network=network,
            read_only=read_only,
            workspace=workspace,
            tool_env=self.tool_env,
            refusal=self._refusal(read_only, why),
            readable=readable,
            private_shm=shm,
            shm_size=self.shm_size,
            hidden=self.hidden,
        )

    def _refusal(self, read_only: bool, why: str) -> str | None:
        if self.enabled and not self.abi and read_only:
            return (
                f"this run is read-only ({why or 'plan mode'}), and the kernel offers no"
                " Landlock to hold a command to that, so no process is started (a command"
                " line cannot be trusted to only read). Run on Linux 5.13+ with Landlock"
                " enabled, or the owner can switch the sandbox off (Runtime(sandbox=False),"
                " --no-sandbox)"
            )
        return None


@dataclass(frozen=True)
class RunSandbox:
    """One run's way of starting processes: ``argv`` wraps a command in the launcher."""

    landlock: bool
    abi: int
    writable: tuple[Path, ...]
    network: bool
    read_only: bool
    workspace: Path
    tool_env: tuple[tuple[str, str | None], ...] = ()
    refusal: str | None = None
    """Why no process may start (a read-only run without Landlock), or None."""
    readable: tuple[Path, ...] | None = None
    """Where its processes may read and run (None: anywhere)."""
    private_shm: bool = False
    """Whether its processes get a ``/dev/shm`` of their own (``sandbox_shm``)."""
    shm_size: int = sandbox_shm.SIZE
    """Its bound, in bytes."""
    hidden: tuple[str, ...] = ()
    """Files its processes may not read (``Sandbox.hidden``)."""

    def argv(self, argv: list[str], temp_dir: Path, reap: Sequence[str] = ()) -> list[str]:
        """``argv`` as the launcher runs it under Landlock (unchanged when the sandbox is off).
        ``reap``: the reaper's flags (``reaper``: the launcher then holds what it starts, as
        its PID namespace's init unless the runtime's environment has
        ``SUBAGENTS_PID_NAMESPACE=0``: ``reaper_ns``). ``SandboxRefused`` when no process may
        start. A run's own directory in the runtime's scratch one (``ProcessGroups.run_dir``:
        Bash commands', hooks'), or a stdio MCP server's own temporary directory, is all the
        process sees of the user's home of scratch directories (``tools/scratch.py``): other
        runs', other runtimes' and other servers' files are out of its reach
        (``sandbox_shm.keep_own``) where it has a namespace of its own."""
        if self.refusal is not None:
            raise SandboxRefused(self.refusal)
        if not self.landlock:
            return argv
        if reap and os.environ.get(sandbox_exec.PID_NAMESPACE_VARIABLE, "").strip() == "0":
            reap = [*reap, sandbox_exec.NO_NAMESPACE]
        head = [sys.executable, "-I", "-S", LAUNCHER, *reap, "--abi", str(self.abi)]
        for path in (*self.writable, temp_dir):
            head += ["--write", str(path)]
        if not self.network and self.abi >= 4:
            head.append("--no-network")
        if self.read_only:
            head.append("--read-only")
        if self.private_shm:
            head += ["--private-shm", "--shm-size", str(self.shm_size)]
            for hidden in self.hidden:
                head += ["--hide", hidden]
            home = scratch.covered_home(temp_dir)
            if home is not None:  # every scratch directory of the user's (sandbox_shm.keep_own)
                head += ["--own-scratch", str(home)]
                for sibling in scratch.siblings(home):  # other fallbacks: a leaked one too
                    head += ["--hide", str(sibling)]
        for path in self.readable or ():
            head += ["--read", str(path)]
        return [*head, "--", *argv]

    def reading(self) -> RunSandbox:
        """The same held to reading, as a ``plan`` run's: writes only to its temporary
        directory, no network. For a Bash line allowed because it only reads
        (``permissions.bash_reads_only``): the judge proves its programs are readers, not
        what they run (git runs programs its repository's config names), so the kernel
        holds it to what the judge claimed (session 26). Unchanged without Landlock."""
        if not self.landlock:
            return self
        return dataclasses.replace(self, writable=(), read_only=True, network=False)

    def unconfined(self) -> RunSandbox:
        """The same without Landlock (a call approved to run outside the sandbox); the
        environment stays scrubbed."""
        return dataclasses.replace(self, landlock=False, refusal=None)

    def environment(
        self, temp_dir: Path | None, base: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        env = tool_environment(
            os.environ if base is None else base,
            self.tool_env,
            workspace=self.workspace,
            temp_dir=temp_dir,
        )
        if self.landlock and self.readable is not None and "GIT_CONFIG_GLOBAL" not in env:
            config = Path(env.get("HOME", "~")).expanduser() / ".gitconfig"
            if not any(config.is_relative_to(p) for p in self.readable):
                env["GIT_CONFIG_GLOBAL"] = "/dev/null"  # git stops at a config it cannot read
        return env


_PROBING = threading.Lock()


def private_shm_refusal() -> str | None:
    """Why sandboxed commands cannot get a ``/dev/shm`` of their own here, or None: asked
    once per process, of a launcher that tries (``--probe-private-shm``); when not, a
    warning says so, once, with what to enable."""
    with _PROBING:  # runs start their first processes on several threads
        return _probe_private_shm()


@functools.cache
def _probe_private_shm() -> str | None:
    probe = [sys.executable, "-I", "-S", LAUNCHER, "--probe-private-shm"]
    try:
        done = subprocess.run(probe, capture_output=True, text=True, timeout=60, check=False)
        why = done.stdout.strip() or done.stderr.strip() or f"exit code {done.returncode}"
    except (OSError, subprocess.SubprocessError) as exc:
        why = f"the probe did not run: {exc}"
    if why == "ok":
        return None
    log.warning(
        "sandboxed commands cannot get a private /dev/shm here, so /dev/shm stays unwritable"
        " to them (multiprocessing, POSIX semaphores and shared memory fail), and a SQLite"
        " run store's files are not hidden from them: they can read every run's records,"
        " and every other run's, runtime's and MCP server's scratch files (Sandbox(readable="
        "[...]) without the store's directory and the temporary one keeps them out;"
        " `subagents doctor` says what holds here)",
        why=why,
        enable=sandbox_shm.ENABLE,
    )
    return why


class SandboxRefused(ToolError):
    """A process that may not start (a read-only run on a kernel without Landlock)."""


SYSTEM_READABLE = (
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/proc",
    "/sys",
    "/dev",
    "/run",
    "/opt",
    sys.prefix,
    sys.base_prefix,
)
"""What a process may always read and run when reads are restricted: the system's programs,
libraries and configuration, and this Python's (paths that do not exist are skipped)."""

LAUNCHER = sandbox_exec.__file__
"""The launcher, run by path (``python -I -S``): it imports nothing but the standard library."""

UNSANDBOXED = Sandbox(enabled=False, abi=0)
"""No Landlock (a ToolContext made by hand, ``Runtime(sandbox=False)``): the environment is
still scrubbed."""


def git_dirs_of_worktree(workspace: Path) -> tuple[Path, ...]:
    """For a workspace inside a git worktree (``.git`` is a file naming its git directory):
    that directory and the shared objects, refs and logs, which ``git commit`` there writes.
    The repository's hooks and config stay out of reach. () for anything else.

    The ``.git`` file lies in the workspace, which editing runs may write, so it is believed
    only when git's own records agree (``worktree_git_dir``): a run that wrote ``gitdir:
    /elsewhere`` there made the next run free to write ``/elsewhere`` (session 26)."""
    for top in (workspace, *workspace.parents):
        marker = top / ".git"
        if marker.is_dir():
            return ()
        if marker.is_file():
            break
    else:
        return ()
    found = worktree_git_dir(marker)
    if found is None:  # a submodule's checkout: its git directory holds all it writes
        own = submodule_git_dir(marker)
        return () if own is None else (own,)
    gitdir, common = found
    shared = [common / name for name in ("objects", "refs", "logs")]
    return tuple(p for p in (gitdir, *shared) if p.is_dir())


def submodule_git_dir(marker: Path) -> Path | None:
    """The git directory a submodule checkout's ``.git`` file names (``.git/modules/NAME``)
    when that directory's ``core.worktree`` names the checkout back, else None: git's own
    record, outside the workspace, which a run that planted the pointer cannot write (as
    ``worktree_git_dir``; the last read of session 26 found submodule workspaces refused).
    Its config is read as text, no git run (``_core_worktree``)."""
    try:
        gitdir = _pointed_git_dir(marker)
        if gitdir is None:
            return None
        named = _core_worktree((gitdir / "config").read_text())
        if named is None or (gitdir / "commondir").exists():
            return None
        back = (gitdir / named).resolve()
    except (OSError, ValueError):  # unreadable, missing, a NUL in a path, not UTF-8
        return None
    return gitdir if back == marker.parent.resolve() else None


def _pointed_git_dir(marker: Path) -> Path | None:
    """The directory a ``.git`` file names (``gitdir: PATH``, relative to its folder),
    resolved; None for a symlink (whatever it points to is not this checkout's record) or a
    file that names none. Believed by neither caller until git's own records agree.
    ``OSError``/``ValueError`` when it cannot be read."""
    if marker.is_symlink():
        return None
    text = marker.read_text().strip()
    if not text.startswith("gitdir:"):
        return None
    return (marker.parent / text.removeprefix("gitdir:").strip()).resolve()


def _core_worktree(config: str) -> str | None:
    """``core.worktree`` in a git config file's text (the last one set, as git reads it)."""
    section, found = "", None
    for raw in config.splitlines():
        line = raw.strip()
        if line.startswith("["):
            section = line.strip("[]").strip().split(" ")[0].lower()
        elif section == "core" and "=" in line:
            key, value = line.split("=", 1)
            if key.strip().lower() == "worktree":
                found = value.strip().strip('"')
    return found


def worktree_git_dir(marker: Path) -> tuple[Path, Path] | None:
    """(the worktree's git directory, the repository's common git directory) named by the
    ``.git`` file ``marker``, or None unless it is one git made: the directory it names is
    ``<common>/worktrees/NAME`` (``common`` read from its ``commondir``), and that
    directory's ``gitdir`` names ``marker`` back. A run can write neither half outside what
    it may already write, so a pointer it planted names nothing more. A ``.git`` that is a
    symlink names nothing: git's records point back to its target, a genuine worktree of
    another repository (review of session 26: the next run wrote that repository's refs)."""
    try:
        gitdir = _pointed_git_dir(marker)
        if gitdir is None:
            return None
        common = (gitdir / (gitdir / "commondir").read_text().strip()).resolve()
        back = (gitdir / (gitdir / "gitdir").read_text().strip()).resolve()
    except (OSError, ValueError):  # unreadable, missing, a NUL in a path
        return None
    if gitdir.parent != common / "worktrees" or back != marker.parent.resolve() / marker.name:
        return None
    return gitdir, common
