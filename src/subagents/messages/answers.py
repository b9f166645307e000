"""Answers: what the supervisor answers to asks (``RestoreReport``, ``SupervisorStats``) and
the read-only views of a tree the runtime builds (``TreeUsage``, ``TreeNode``).
"""

from __future__ import annotations

from typing import Any

import msgspec

from subagents.messages.records import RunStatus, Usage


class RestoreReport(msgspec.Struct, kw_only=True):
    """What a restore found: runs resumed, queued again, failed, cancelled; orphaned roots."""

    resumed: list[str] = msgspec.field(default_factory=list)
    requeued: list[str] = msgspec.field(default_factory=list)
    failed: list[str] = msgspec.field(default_factory=list)
    cancelled: list[str] = msgspec.field(default_factory=list)
    orphans: list[str] = msgspec.field(default_factory=list)
    elsewhere: list[str] = msgspec.field(default_factory=list)
    """Unfinished runs left alone: a live runtime (its lease is alive) hosts them, or their
    host is being started again (``restarting``)."""
    restarting: list[str] = msgspec.field(default_factory=list)
    """Of ``elsewhere``, the runs left because their host's lease is dead but the host is
    being started again (a detached tree's host that Ray still lists): its new process takes
    them up."""
    taken_from: list[str] = msgspec.field(default_factory=list)
    """The owners whose orphaned runs this restore took over (their leases lapsed)."""


class SupervisorStats(msgspec.Struct, frozen=True, kw_only=True):
    """The supervisor's counters at one moment (the answer to ``Inspect``)."""

    in_flight: int
    """Runs holding a concurrency slot (running or waiting)."""
    peak: int
    """The most runs that ever held a slot at once."""
    queued: int
    """Runs waiting for a slot."""
    hosted: int
    """Live runs this supervisor hosts."""
    spent: Usage | None = None
    """What ``Inspect.run_id``'s subtree has spent, as its budget ledger counts it (None
    when no run was named; nothing for a run the ledger does not hold)."""


class RunProgress(msgspec.Struct, frozen=True, kw_only=True):
    """Where a run is, now (the answer to ``StatusOf``; ``subagent_status``, ``ctx.status``,
    ``Runtime.status``): asked without waiting for the run."""

    run_id: str
    agent: str
    status: RunStatus
    depth: int = 0
    parent_run_id: str | None = None
    steps: int = 0
    """Model steps recorded; the one under way, if any, is ``steps + 1``."""
    tool_calls: int = 0
    last_tool: str | None = None
    """The last tool its model (or function) called, None before the first."""
    last_tool_input: dict[str, Any] = msgspec.field(default_factory=dict)
    """That call's input, shortened (as its ``tool_call`` event keeps it)."""
    usage: Usage = msgspec.field(default_factory=Usage)
    """Tokens and cost so far (its own, not its children's)."""
    unread_mail: int = 0
    """Mail delivered to it (or kept for it while queued) that it has not read."""
    writing: str | None = None
    """The end of what its model has streamed in the step under way, if it is streaming."""
    started_at: float | None = None
    ended_at: float | None = None
    result: str | None = None
    error: str | None = None


class RunUsage(msgspec.Struct, frozen=True, kw_only=True):
    """What one run has used so far (one line of a ``TreeUsage``)."""

    run_id: str
    agent: str
    status: RunStatus
    parent_run_id: str | None = None
    depth: int = 0
    steps: int = 0
    tool_calls: int = 0
    usage: Usage = Usage()


class TreeUsage(msgspec.Struct, frozen=True, kw_only=True):
    """What a run and every run under it have used so far, live or ended: the subtree's
    totals and one ``RunUsage`` per run (the run first, then its descendants, parents
    before children). ``live``: how many of them have not ended yet."""

    run_id: str
    status: RunStatus
    runs: int = 0
    live: int = 0
    steps: int = 0
    tool_calls: int = 0
    usage: Usage = Usage()
    per_run: tuple[RunUsage, ...] = ()

    @property
    def tokens(self) -> int:
        """Every token billed: input (with cache reads and writes) plus output."""
        return self.usage.total_tokens

    @property
    def cost_usd(self) -> float:
        return self.usage.cost_usd

    @property
    def model_calls(self) -> int:
        return self.usage.model_calls


class TreeNode(msgspec.Struct, frozen=True, kw_only=True):
    """One run in an execution tree view, with its subtree's totals."""

    run_id: str
    agent: str
    status: RunStatus
    depth: int
    steps: int
    usage: Usage
    subtree_usage: Usage
    task: str = ""
    result: str | None = None
    error: str | None = None
    started_at: float | None = None
    ended_at: float | None = None
    children: tuple[TreeNode, ...] = ()
    orphaned: bool = False
    """Unfinished and its host is gone (set by views that read the store's leases)."""
    approvals: tuple[str, ...] = ()
    """The ids of the approvals it waits for, kept in the store (set by views that read
    them: `subagents tree`, `attach`)."""
