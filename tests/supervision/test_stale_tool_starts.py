"""A side-effecting tool call of a start that is over may not run, even where no stop has
reached its actor.

A tool whose call may do something twice (``Tool.side_effects``: Bash, Edit, an MCP tool, a
user's tool) is journaled before it runs: the agent asks the supervisor (``ToolStarting``)
and runs it only on ``True``. The supervisor answered ``True`` to every such ask, so the
only guard against an old start's call was its actor's cancel flag: set with the decision
where the decision stops the actor (``StopAgent``), but not where nothing reaches it (a run
moved off a node that was taken for lost while it lived on, ``host_lost``). Now the reply is
whether the start is still its run's (``RunTable.reporting``): during a restart's backoff,
after the next start began, or after the run ended, the old start's call is refused (the
agent answers the model "not run: stopping", ``NOT_RUN_STOPPING``) and nothing is kept.
Without threads: the core fed directly. (tests/runtime/test_stale_tool_calls.py: with a real
runtime.)"""

from __future__ import annotations

from subagents.definitions import AgentSpec
from subagents.messages import RunFinished, ToolStarting
from subagents.supervision.effects import Decision, ScheduleRestart, StartRun

from .test_core import Harness, of


def _starting(run_id: str, attempt: int, use: str = "tu-1") -> ToolStarting:
    return ToolStarting(run_id=run_id, step=1, tool_use_id=use, tool="Bash", attempt=attempt)


def _asked(h: Harness, msg: ToolStarting) -> Decision:
    """The core's decision on ``msg``, its writes carried out as the actor would."""
    return h.core._do(h.core.core.tool_starting(msg))


def test_a_tool_start_of_the_current_start_may_run() -> None:
    h = Harness()
    lead = h.run("lead")
    decision = _asked(h, _starting(lead, attempt=1))
    assert decision.reply is True


def test_a_tool_start_of_a_start_a_restart_ended_is_refused_during_the_backoff() -> None:
    h = Harness(None, AgentSpec(name="lead", description="d", restart="transient"))
    lead = h.run("lead")
    effects = h.core.finished(RunFinished(run_id=lead, error_kind="crash", error="x", attempt=1))
    assert of(effects, ScheduleRestart) != []  # its backoff begins
    during = _asked(h, _starting(lead, attempt=1))
    assert during.reply is False  # the restart is decided: that start is over
    assert during.writes == [] and during.effects == []  # and nothing of it kept
    (start,) = of(h.core.restart_due(lead), StartRun)
    assert start.attempt == 2
    late = _asked(h, _starting(lead, attempt=1, use="tu-2"))
    assert late.reply is False  # the next start has begun: still the old one's
    assert _asked(h, _starting(lead, attempt=2, use="tu-3")).reply is True


def test_a_tool_start_of_a_parent_its_fail_parent_child_restarted_is_refused() -> None:
    h = Harness()
    lead = h.run("lead", on_failure="retry", max_retries=1)
    worker = h.run("worker", lead, on_failure="fail_parent")
    h.core.finished(RunFinished(run_id=worker, error_kind="crash", error="x", attempt=1))
    assert _asked(h, _starting(lead, attempt=1)).reply is False


def test_a_tool_start_of_an_ended_or_unknown_run_is_refused() -> None:
    h = Harness()
    lead = h.run("lead")
    h.core.finished(RunFinished(run_id=lead, result="done", attempt=1))
    assert _asked(h, _starting(lead, attempt=1)).reply is False
    assert _asked(h, _starting("r-unknown", attempt=1)).reply is False
