"""ShellLimits: how many background shells (``run_in_background``) a run, and the runtime,
may hold at once, and the answer a start past either limit gets.

Why: each background shell holds a reaper process (~4 MB private), an output relay thread,
three file descriptors and up to the output cap on disk, for as long as it or anything it
started runs. A model in a loop started 200 (606 fds, ~1.8 GB of reapers): nothing stopped
it taking the machine. A shell holds its slot while its reaper lives (its command, or a
daemon it left, runs): that is what costs; one whose processes have all ended frees it, its
output still readable. A refused start is a tool error the model reads, naming the limit and
how to free a slot; nothing else is touched. ``ShellSlots`` keeps the count; not
thread-safe by itself: ``ProcessGroups`` calls it under its lock.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from subagents.tools.errors import ToolError
from subagents.tools.process import Process

PER_RUN = 16
"""Background shells one run may hold at once: ``Limits.max_background_shells_per_run``'s
default (``supervision.limits`` reads it here: one place)."""
PER_RUNTIME = 64
"""Background shells all of a runtime's runs may hold at once: ``Limits.max_background_shells``'s
default (read here too)."""


@dataclass(frozen=True)
class ShellLimits:
    """The two limits; ``refusal`` says whether one more shell may start."""

    per_run: int = PER_RUN
    per_runtime: int = PER_RUNTIME

    def __post_init__(self) -> None:
        for name in ("per_run", "per_runtime"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"ShellLimits.{name} must be a positive integer, got {value!r}")

    def refusal(self, run_shells: Sequence[str], runtime_shells: int) -> str | None:
        """Why one more background shell may not start (None: it may): ``run_shells``, the
        ids of the shells the run holds; ``runtime_shells``, how many all runs hold."""
        if len(run_shells) >= self.per_run:
            held = f"this run holds {len(run_shells)} background shells, its limit"
            limit = "Limits.max_background_shells_per_run"
        elif runtime_shells >= self.per_runtime:
            held = f"the runtime's runs hold {runtime_shells} background shells, its limit"
            limit = "Limits.max_background_shells"
        else:
            return None
        free = (
            f"stop one of this run's with KillShell ({', '.join(run_shells)})"
            if run_shells
            else "wait for another run's to end"
        )
        return (
            f"Cannot start another background shell: {held} ({limit}). To free a slot, {free},"
            " or wait for one to end (BashOutput shows its status). A shell holds its slot"
            " while it or any process it started runs."
        )


class ShellLimitReached(ToolError):
    """A background shell refused: its run, or the runtime, holds as many as its limit
    (``ShellLimits``); the message names the limit and how to free a slot."""


class ShellSlots:
    """The background shells that hold a slot: those admitted and starting, and those whose
    reaper has not been seen ended (forgotten here once it has). The caller's lock guards it."""

    def __init__(self, limits: ShellLimits) -> None:
        self.limits = limits
        self._held: dict[str, Process] = {}
        self._admitted: dict[str, str] = {}
        """Admitted, not yet started: id -> run."""

    def admit(self, shell_id: str, run_id: str) -> None:
        """Take a slot for ``shell_id`` of ``run_id``, or raise ``ShellLimitReached``."""
        for held_id, process in list(self._held.items()):
            if process.poll() is not None:  # its reaper ended: nothing of it runs
                del self._held[held_id]
        held = [(i, p.run_id) for i, p in self._held.items()] + list(self._admitted.items())
        of_run = [i for i, owner in held if owner == run_id]
        refusal = self.limits.refusal(of_run, len(held))
        if refusal is not None:
            raise ShellLimitReached(refusal)
        self._admitted[shell_id] = run_id

    def started(self, process: Process) -> None:
        """The admitted shell started: its slot is held until its reaper ends."""
        self._held[process.id] = process
        self._admitted.pop(process.id, None)

    def failed(self, shell_id: str) -> None:
        """The admitted shell did not start: its slot is free."""
        self._admitted.pop(shell_id, None)

    def get(self, shell_id: str) -> Process | None:
        return self._held.get(shell_id)

    def forget_run(self, run_id: str) -> None:
        """The run's shells were killed (its end): their slots go with them."""
        for shell_id in [i for i, p in self._held.items() if p.run_id == run_id]:
            del self._held[shell_id]

    def clear(self) -> None:
        self._held.clear()
        self._admitted.clear()
