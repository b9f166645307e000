"""A live run's reports of its work, decided: a model call (its usage charged to the budgets,
its checkpoint kept, the mail it showed marked read), a tool call counted, and the tool
journal (a side-effecting call about to run, and an answer kept in the checkpoint, so a
resumed run neither redoes a call nor repeats its answer).

Why its own part: these are the reports a run sends most, step after step, and each only
keeps what the run did; none starts, queues or ends a run but the budget's ``over_budget``,
which it asks of ``Lifecycle``. A report from a run that ended, or from an earlier start of
it (``RunTable.reporting``), is dropped, as everywhere in the core.
"""

from __future__ import annotations

from collections.abc import Callable

from subagents.messages import (
    CheckpointDelta,
    EventKind,
    StepTaken,
    ToolAnswered,
    ToolCalled,
    ToolStarting,
)
from subagents.store.writes import SaveCheckpoint
from subagents.supervision.effects import Decided
from subagents.supervision.lifecycle import Lifecycle
from subagents.supervision.mailroom import MailRoom
from subagents.supervision.policy_book import PolicyBook
from subagents.supervision.progress import Progress
from subagents.supervision.runs import RunTable

_STEP = EventKind.STEP
"""Read on every model call's report, named once: an enum's member read through its class
costs Python 3.11's ``EnumType.__getattr__`` slot, ~1.1k instructions (``starts``)."""


class Reports:
    """The work reports of the runs of ``runs``; each call returns what it decided."""

    def __init__(
        self,
        runs: RunTable,
        now: Callable[[], float],
        mail: MailRoom,
        progress: Progress,
        policies: PolicyBook,
        lifecycle: Lifecycle,
    ) -> None:
        self.runs = runs
        self.now = now
        self.mail = mail
        self.progress = progress
        self.policies = policies
        self.lifecycle = lifecycle

    def step_taken(self, msg: StepTaken) -> Decided:
        """A model call: its usage, its checkpoint, the mail it showed; over budget, stop."""
        decided = Decided()
        state = self.runs.reporting(msg.run_id, msg.attempt)
        if state is None:
            return decided
        usage = state.record.usage + msg.usage
        decided.writes.append(self.runs.update(state, steps=msg.step, usage=usage))
        if msg.checkpoint is not None:
            state.checkpoint = state.saved = msg.checkpoint
            decided.writes.append(SaveCheckpoint(msg.checkpoint))
        if msg.read_mail:  # (most steps showed no mail: no receipt decided for none)
            decided.add(self.mail.read(msg.run_id, msg.read_mail))
        data = {
            "step": msg.step,
            "input_tokens": msg.usage.total_input_tokens,
            "output_tokens": msg.usage.output_tokens,
        }
        decided.event(_STEP, state.record, self.now(), data)
        if state.preview is not None:  # (most steps streamed nothing: no preview to drop)
            decided.writes += self.progress.stepped(state)
        over_ids = self.policies.charge(msg)  # deepest first
        for run_id in over_ids:
            over = self.runs.live(run_id)
            if over is not None:
                decided.add(self.lifecycle.over_budget(over))
        still = self.runs.live(msg.run_id) if over_ids else None
        if still is not None:
            # A detached run (its over-budget ancestor ended, or ends now without it): its
            # steps are charged to its ancestors' budgets, so they bound it too; else each
            # detached child could spend all its ancestors had left, after they ended.
            ancestor = self.runs.get(over_ids[0])
            decided.add(self.lifecycle.over_budget(still, ancestor))
        return decided

    def tool_answered(self, msg: ToolAnswered) -> Decided:
        """Keep a tool result in the run's checkpoint so a resume does not redo the call."""
        decided = Decided()
        state = self.runs.reporting(msg.run_id, msg.attempt)
        if state is not None:
            delta = CheckpointDelta(run_id=msg.run_id, step=msg.step, answered=msg.result)
            if (write := state.add_to_checkpoint(delta)) is not None:
                decided.writes.append(write)
            decided.add(self.mail.read(msg.run_id, msg.read_mail))
        return decided

    def tool_starting(self, msg: ToolStarting) -> Decided:
        """The tool journal: a side-effecting call is about to run. Kept in the checkpoint
        before the agent hears back, so a crash during the call cannot make a resumed run do
        it again (``tools.journal`` decides what the model is told). From a start that is
        over (``RunTable.reporting``: a restart, a retry or a move decided, an end) nothing is
        kept and the call may not run (``SupervisorCore.tool_starting``'s reply): the old
        start takes no new side-effecting action, even where no stop reaches its actor."""
        decided = Decided()
        state = self.runs.reporting(msg.run_id, msg.attempt)
        if state is not None:
            use_id = msg.tool_use_id
            delta = CheckpointDelta(
                run_id=msg.run_id,
                step=msg.step,
                # it raised: known to be over, not "interrupted"
                ended=use_id if msg.ended else None,
                started=None if msg.ended else use_id,
            )
            if (write := state.add_to_checkpoint(delta)) is not None:
                decided.writes.append(write)
        return decided

    def tool_called(self, msg: ToolCalled) -> Decided:
        """A tool call counted on the run's record (``RunRecord.tool_calls``), and its event."""
        decided = Decided()
        state = self.runs.reporting(msg.run_id, msg.attempt)
        if state is not None:
            calls, state.last_tool = state.record.tool_calls + 1, (msg.tool, msg.input)
            decided.writes.append(self.runs.update(state, tool_calls=calls))
            data = {"tool": msg.tool, "input": msg.input}
            decided.event(EventKind.TOOL_CALL, state.record, self.now(), data)
        return decided
