"""Leaving plan mode: where an approved ExitPlanMode takes a run, and finding it again.

Claude Code's ExitPlanMode puts the plan to the user, and an approved plan ends plan mode.
Here the plan is put to the run's approver like any ask (the parent when ``ask_parent`` routes
asks to it, else the runtime's approval handler: ``ToolCalls.decide``), and an approved one
moves the run to the mode it would have outside plan mode (``target_mode``), never past what
its requesters hold it to: permissions only narrow down the tree, so a run one of whose
requesters is in plan mode cannot leave it, whoever approves.

Why the journaled answer is the record: the approval's answer (``APPROVED``...) is a tool
result the runtime wrote, kept in the run's checkpoint like every answer. A run restored after
a crash finds it in its conversation (``approved_in``) and leaves plan mode again before it
goes on, so it neither returns to plan mode mid-conversation nor leaves it without approval
(nothing else moves it).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from subagents.definitions.spec import AgentSpec
from subagents.messages import ChatMessage, PermissionGrant, ToolResultBlock, ToolUseBlock
from subagents.supervision.ceilings import RUNTIME, requesters
from subagents.tools.modes import MODES, Mode, parse_mode, stricter
from subagents.tools.plan_mode import NAME

APPROVED = "Your plan is approved: you have left plan mode"
"""How an approved ExitPlanMode's answer begins (what ``approved_in`` looks for)."""


def held_to_plan(ceiling: Iterable[PermissionGrant]) -> PermissionGrant | None:
    """The requester that holds a run to plan mode for good (one of its requesters is in
    plan mode: no approval takes it out, ``target_mode``), or None."""
    return next((grant for grant in requesters(ceiling) if grant.mode == "plan"), None)


def target_mode(
    runtime_mode: Mode, spec: AgentSpec, ceiling: Sequence[PermissionGrant]
) -> tuple[Mode | None, str]:
    """The mode a run of ``spec`` in plan mode moves to once its plan is approved: its
    definition's ``permissionMode`` if not plan, else the runtime's (the one that spawned its
    tree, kept in its ceiling) if not plan, else ``default``; no wider than any mode above
    it. (None, why) when a requester holds it to plan mode."""
    grant = held_to_plan(ceiling)
    if grant is not None:
        return None, (
            f"the requesting run {grant.agent} ({grant.run_id}) is in plan mode, and a run"
            " may do no more than the runs that requested it: you stay in plan mode. End"
            " your turn with the plan as your answer; your requester acts on it"
        )
    spawned_by = next((g.mode for g in ceiling if g.agent == RUNTIME), None)
    wanted = (spec.permission_mode, spawned_by or runtime_mode)
    mode: Mode = next(
        (parse_mode(m, "permissionMode") for m in wanted if m in MODES and m != "plan"),
        "default",
    )
    for bound in (runtime_mode, *(g.mode for g in ceiling)):
        if bound in MODES and bound != "plan":
            mode = stricter(mode, parse_mode(bound, "permissionMode"))
    return mode, ""


def approved(mode: Mode) -> str:
    """The answer of an approved ExitPlanMode: the model goes on, in ``mode``."""
    return (
        f"{APPROVED} and now run in {mode} mode. Carry the plan out, starting with its first step."
    )


def approved_in(messages: Sequence[ChatMessage], answered: Iterable[ToolResultBlock]) -> bool:
    """Whether this conversation holds an approved ExitPlanMode: an answer beginning with
    ``APPROVED`` to an ExitPlanMode call of the turn just before it (``answered``: the last
    turn's answers, not yet in ``messages``). A turn's call ids are distinct (``offer.
    distinct_ids``), and a result is matched only to the turn it answers: a later call
    reusing an id cannot pass for an approval."""
    last = len(messages) - 1
    for n, message in enumerate(messages):
        if message.role != "assistant":
            continue
        exits = {b.id for b in message.content if isinstance(b, ToolUseBlock) and b.name == NAME}
        if not exits:
            continue
        if n == last:
            results: Iterable[object] = answered
        else:
            results = messages[n + 1].content if messages[n + 1].role == "user" else ()
        for r in results:
            if (
                isinstance(r, ToolResultBlock)
                and r.tool_use_id in exits
                and not r.is_error
                and r.content.startswith(APPROVED)
            ):
                return True
    return False
