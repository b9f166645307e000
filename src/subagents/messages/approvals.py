"""Durable approvals: a tool call's "ask" kept in the store until someone answers it.

With ``Runtime(approve="store")`` (and every ``subagents run --detach``), a call that needs a
person's yes or no is not put to a callable on the agent's thread: it is recorded here as a
pending ``ApprovalRecord``, the run waits holding no thread, and any process that can open
the store answers it (``Runtime.answer``, ``subagents approve``/``deny``). The answer goes
back to the run through the store, so a crash of either side loses nothing.
"""

from __future__ import annotations

import hashlib
from typing import Any, Literal

import msgspec

ApprovalStatus = Literal["pending", "allowed", "denied"]


class ApprovalRecord(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One ask: what a run wants to do, why it is asked, and (once answered) the answer.

    ``answer``: the reason given with the answer (for ``AskUserQuestion``, the answer text
    itself); ``remember``: an allow rule the person asked to keep for the run's tree
    (``Bash(pytest:*)``), which answers that tree's later asks it matches."""

    approval_id: str
    run_id: str
    root_run_id: str
    agent: str
    tool: str
    input: dict[str, Any]
    reason: str
    """Why it is asked (the permission decision's reason)."""
    requester: str
    """Who asked for the run's work: its parent run's id, or ``external`` for a root."""
    tool_use_id: str
    asked_at: float
    status: ApprovalStatus = "pending"
    answer: str | None = None
    answered_at: float | None = None
    remember: str | None = None
    retries: int | None = None
    """The run's retry generation when it asked (``RunRecord.retries``): a retry starts the
    run from scratch, so an ask of an earlier generation waits for nothing any more (None:
    kept by a version that did not record it)."""

    @property
    def pending(self) -> bool:
        return self.status == "pending"


def approval_id_for(run_id: str, tool_use_id: str, retries: int = 0, step: int = 0) -> str:
    """The id of the approval of one call: the same for the same call, so a run that asks
    again after a restart or a resume finds its ask (and the answer it may have got
    meanwhile). ``retries``: the run's retry generation (a retry starts from scratch: its
    calls are new ones, whatever ids a model gives them). ``step``: the turn whose response
    made the call (a restarted run asks again at the same step): a model that gives a call
    of a later turn an id it gave before (a buggy or hostile backend) gets an approval of
    its own, shown to a person, not the earlier call's answer applied to it unseen
    (tests/tools/test_repeated_tool_ids.py)."""
    said = f"{run_id}\0{retries}\0{step}\0{tool_use_id}"
    return "ap" + hashlib.sha256(said.encode()).hexdigest()[:14]
