"""The run lifecycle as a table of events (in the manner of h11's state machine).

A part of the core never chooses a run's status: it says what happened to the run (a
``Move``: it started, it waits, it failed...) and ``RunTable.fire`` looks the next status up
in ``LIFECYCLE``, the one place the lifecycle is written down. A move the table has no entry
for, from the run's status, is a bug in the supervisor, raised as ``IllegalTransition`` before
anything changes, so that tests catch it (and the supervisor actor logs it, and survives it,
like any failed decision). A terminal status has no entry at all: a run ends exactly once
(late reports are discarded before the table is asked).

docs/architecture.md's "run lifecycle" table is ``lifecycle_rows()``, rendered; a test holds
the two equal.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

from subagents.messages import RunStatus

Q, R, W = RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.WAITING


class Move(StrEnum):
    """What happens to a run that changes its status (not a published ``messages.Event``:
    those say more, and some, like ``spawned`` or ``mail_sent``, change no status)."""

    STARTED = "started"
    """Its agent's first start: admitted into a free slot, or a slot freed for it."""
    STARTED_AGAIN = "started_again"
    """Its agent started again: after a restart's or a retry's backoff, a restore, a move
    off a lost host."""
    WAITS = "waits"
    """Its agent went back to its mailbox with calls pending."""
    WORKS = "works"
    """Its agent works again."""
    COMPLETED = "completed"
    """It returned its result."""
    FAILED = "failed"
    """It failed (no policy made it go again), its agent is gone at a restore, the queue was
    full at a restore, the store failed under it."""
    CANCELLED = "cancelled"
    """It was stopped, its parent ended, the runtime closed."""
    TIMED_OUT = "timed_out"
    """Its deadline passed."""
    OVER_BUDGET = "over_budget"
    """A step took it (or an ancestor sharing its budget) over budget."""


LIFECYCLE: Mapping[tuple[RunStatus, Move], RunStatus] = {
    (Q, Move.STARTED): R,
    (Q, Move.FAILED): RunStatus.FAILED,
    (Q, Move.CANCELLED): RunStatus.CANCELLED,
    (R, Move.STARTED_AGAIN): R,
    (R, Move.WAITS): W,
    (W, Move.STARTED_AGAIN): R,
    (W, Move.WORKS): R,
    **{
        (live, move): end
        for live in (R, W)
        for move, end in (
            (Move.COMPLETED, RunStatus.COMPLETED),
            (Move.FAILED, RunStatus.FAILED),
            (Move.CANCELLED, RunStatus.CANCELLED),
            (Move.TIMED_OUT, RunStatus.TIMED_OUT),
            (Move.OVER_BUDGET, RunStatus.BUDGET_EXCEEDED),
        )
    },
}
"""(a run's status, what happened to it) -> its next status: the lifecycle, whole."""

ENDINGS: Mapping[RunStatus, Move] = {
    end: move for (_, move), end in LIFECYCLE.items() if end.terminal
}
"""The move that ends a run in each terminal status (one each)."""

WHEN: Mapping[Move, str] = {
    Move.STARTED: "admitted into a free slot, or a slot frees for it (`Lifecycle.start_queued`):"
    " a run ended, or a waiting run parked (`parking.py`)",
    Move.STARTED_AGAIN: "started again: a restart's or a retry's backoff is over, a restore,"
    " a move off a lost host",
    Move.WAITS: "its agent went back to its mailbox with calls pending",
    Move.WORKS: "its agent works again",
    Move.COMPLETED: "it returned its result",
    Move.FAILED: "it failed; at a restore its agent is gone or the queue is full; the store failed",
    Move.CANCELLED: "stopped, its parent ended, the runtime closed",
    Move.TIMED_OUT: "its deadline passed",
    Move.OVER_BUDGET: "a step took it over its budget",
}
"""What each move means, as docs/architecture.md's lifecycle table says it."""


class IllegalTransition(RuntimeError):
    """A run was moved in a way the lifecycle table does not allow from its status: a bug."""


def next_status(run_id: str, status: RunStatus, move: Move) -> RunStatus:
    """The status ``move`` takes a run in ``status`` to; ``IllegalTransition`` if none."""
    new = LIFECYCLE.get((status, move))
    if new is None:
        raise IllegalTransition(
            f"run {run_id}: {move} from {status} is not a transition of the run lifecycle"
        )
    return new


def allowed(old: RunStatus, new: RunStatus) -> bool:
    """Some move takes a run from ``old`` to ``new``."""
    return any(s is old and n is new for (s, _), n in LIFECYCLE.items())


def lifecycle_rows() -> list[tuple[str, str, str, str]]:
    """The table as docs/architecture.md shows it: (from, move, to, when), one row per move
    and target, the statuses it applies from joined, in the order of ``LIFECYCLE``."""
    grouped: dict[tuple[Move, RunStatus], list[RunStatus]] = {}
    for (status, move), new in LIFECYCLE.items():
        grouped.setdefault((move, new), []).append(status)
    return [
        (", ".join(f"`{s}`" for s in froms), f"`{move}`", f"`{new}`", WHEN[move])
        for (move, new), froms in grouped.items()
    ]


def lifecycle_markdown() -> str:
    """``lifecycle_rows`` as a markdown table."""
    lines = ["| from | move | to | when |", "|---|---|---|---|"]
    lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in lifecycle_rows()]
    return "\n".join(lines)
