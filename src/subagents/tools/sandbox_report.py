"""What the sandbox holds on this machine, check by check (``subagents doctor``).

Why: the sandbox's strength depends on the kernel and the system's settings (Landlock and its
ABI, user namespaces, the architecture's system call table), and a weaker sandbox runs
rather than refusing: each gap is a warning in the runtime's log, easy to miss. Where
commands get no mount namespace of their own (user namespaces off), they can read the run
store, every other run's and runtime's scratch files and MCP servers' temporary ones
(session 27: said nowhere but in that warning). This says all of it in one place, and what
to change. ``checks`` decides from what was found (a plain function); ``found`` asks.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Literal

import msgspec

from subagents.tools import sandbox_exec, sandbox_shm, sandbox_syscalls
from subagents.tools.scratch import ScratchHomeError, home_name, scratch_home, shared_fallback

State = Literal["ok", "weak", "off"]


class Check(msgspec.Struct, frozen=True):
    """One part of the sandbox: its name, whether it holds here, and what that means."""

    name: str
    state: State
    says: str


class Found(msgspec.Struct, frozen=True):
    """What the machine offers: Landlock's ABI (0: none), why commands get no namespace of
    their own (None: they do), whether the filter knows this architecture, and the scratch
    home (or why it cannot be used)."""

    abi: int
    namespace_refusal: str | None
    filter_known: bool
    machine: str
    home: str
    home_error: str | None = None
    squatted: str | None = None
    """The user's home of scratch directories that could not be used (someone else's, a
    symlink), so that ``home`` is this process's fallback (``tools/scratch.py``); None when
    ``home`` is it."""
    shared: bool = False
    """Whether that fallback is the user's shared one (``scratch.shared_fallback``)."""


def found() -> Found:
    """Ask the kernel, the launcher's probe and the temporary directory."""
    from subagents.tools.sandbox import private_shm_refusal

    abi = sandbox_exec.landlock_abi()
    machine = os.uname().machine
    known = sandbox_syscalls.filter_program(read_only=True, network=False) is not None
    squatted, shared = None, False
    try:
        made, error = scratch_home(), None
        home = str(made)
        first = Path(tempfile.gettempdir()) / home_name()
        if made != first:
            squatted, shared = str(first), made == shared_fallback()
    except ScratchHomeError as exc:
        home, error = "", str(exc)
    refusal = private_shm_refusal() if abi else "no Landlock: no launcher runs"
    return Found(abi, refusal, known, machine, home, error, squatted, shared)


def checks(machine: Found) -> list[Check]:
    """Each part's state and what it means for a run's commands, hooks and MCP servers."""
    if machine.abi == 0:  # (the scratch home is theirs all the same: said when refused)
        off = Check(
            "landlock",
            "off",
            "the kernel offers no Landlock: commands, hooks and MCP servers run with the"
            " user's rights (they can write every file the user can, the run store"
            " included); plan-mode runs start none. Use Linux 5.13+ with Landlock"
            " enabled (lsm=landlock,...)",
        )
        return [off] if machine.home_error is None else [off, _scratch(machine)]
    found = [Check("landlock", "ok", f"ABI {machine.abi}: commands write only where their run may")]
    if machine.abi >= 4:
        found.append(Check("network", "ok", "Sandbox(network=...) can turn it off per mode"))
    else:
        found.append(
            Check("network", "weak", f"ABI {machine.abi} cannot turn the network off (4+)")
        )
    if machine.filter_known:
        found.append(Check("filter", "ok", f"seccomp filter for {machine.machine}"))
    else:
        found.append(
            Check(
                "filter",
                "weak",
                f"no system call table for {machine.machine}: capabilities are dropped, but"
                " no seccomp filter is installed (io_uring, TIOCSTI, mount... not denied)",
            )
        )
    found.append(_namespace(machine))
    found.append(_scratch(machine))
    return found


def _scratch(machine: Found) -> Check:
    if machine.home_error is None and machine.squatted is not None and machine.shared:
        return Check(
            "scratch",
            "ok",
            f"{machine.squatted} is another user's or a symlink (made first in a shared"
            " temporary directory): every process of the user keeps its scratch files in"
            f" its private runtime directory instead ({machine.home}), covered whole as the"
            " first would be. Remove it (or have its owner remove it)",
        )
    if machine.home_error is None and machine.squatted is not None:
        return Check(
            "scratch",
            "weak",
            f"{machine.squatted} is another user's or a symlink (made first in a shared"
            " temporary directory): each process keeps its scratch files in a private home"
            f" of its own instead (this one's: {machine.home}), so a sandboxed command no"
            " longer has another process's runtimes' and MCP servers' scratch files covered."
            " Remove it (or have its owner remove it), or set TMPDIR to a directory of your"
            " own",
        )
    if machine.home_error is None:
        return Check("scratch", "ok", f"{machine.home}: private (0700), the user's")
    return Check("scratch", "off", machine.home_error)


def _namespace(machine: Found) -> Check:
    if machine.namespace_refusal is None:
        return Check(
            "namespace",
            "ok",
            "each command gets a mount namespace of its own: a private /dev/shm; the run"
            " store's files hidden; the scratch directories of every run, runtime and MCP"
            " server but its own covered",
        )
    return Check(
        "namespace",
        "weak",
        f"commands get no mount namespace of their own here ({machine.namespace_refusal}):"
        " /dev/shm stays unwritable to them, and they can READ a SQLite run store (every"
        " run's task, conversation and approvals) and every other run's, runtime's and MCP"
        " server's scratch files. To close it: "
        + sandbox_shm.ENABLE
        + "; or limit reads, Sandbox(readable=[...]) without the store's directory and the"
        " temporary directory",
    )


def holds(found: list[Check]) -> bool:
    return all(check.state == "ok" for check in found)
