"""The run lifecycle as a transition table (in the manner of h11's state machine).

Every change of a run's status goes through ``check_transition``; a change the table does not
allow is a bug in the supervisor, raised as ``IllegalTransition`` so that tests catch it
(and the supervisor actor logs it, and survives it, like any failed decision).

    queued  --start-->  running  --wait-->  waiting
    running --resume/restart--> running      waiting --resume/restart--> running
    queued | running | waiting  --end-->  a terminal status (exactly once)

| from | to | when |
|---|---|---|
| queued | running | a slot frees (or the deadlock breaker starts it over the limit) |
| queued | cancelled | stopped, its parent ended, the runtime closed |
| queued | failed | restored after a crash: its agent is gone, or the queue is full |
| running | running | started again: a restart or a retry after its backoff |
| running | waiting | it waits for children or mail with calls pending |
| running, waiting | any terminal status | it ended: by itself, stopped, timed out, over budget |
| waiting | running | it resumed, or was started again (restart, restore) |
| terminal | - | never: a run ends exactly once; late reports are discarded before this |
"""

from __future__ import annotations

from collections.abc import Mapping

from subagents.messages import TERMINAL_STATUSES, RunStatus

_ENDS = TERMINAL_STATUSES

TRANSITIONS: Mapping[RunStatus, frozenset[RunStatus]] = {
    RunStatus.QUEUED: frozenset({RunStatus.RUNNING, RunStatus.CANCELLED, RunStatus.FAILED}),
    RunStatus.RUNNING: frozenset({RunStatus.RUNNING, RunStatus.WAITING, *_ENDS}),
    RunStatus.WAITING: frozenset({RunStatus.RUNNING, *_ENDS}),
    RunStatus.COMPLETED: frozenset(),
    RunStatus.FAILED: frozenset(),
    RunStatus.CANCELLED: frozenset(),
    RunStatus.TIMED_OUT: frozenset(),
    RunStatus.BUDGET_EXCEEDED: frozenset(),
}
"""For each status, the statuses a run may go to next."""


class IllegalTransition(RuntimeError):
    """A run was moved between two statuses the lifecycle table does not connect: a bug."""


def allowed(old: RunStatus, new: RunStatus) -> bool:
    return new in TRANSITIONS[old]


def check_transition(run_id: str, old: RunStatus, new: RunStatus) -> None:
    """Raise ``IllegalTransition`` unless a run may go from ``old`` to ``new``."""
    if new not in TRANSITIONS[old]:
        raise IllegalTransition(
            f"run {run_id}: {old} -> {new} is not a transition of the run lifecycle"
        )
