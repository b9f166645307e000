"""Detached children, without threads: a child spawned with ``detach`` outlives its parent,
its outcome goes to its nearest live ancestor, a stop chooses its scope (the turn or the
tree), and a restore takes a detached child up though its parent has ended."""

from __future__ import annotations

from subagents.messages import (
    ChildDone,
    DeliverMail,
    EventKind,
    RunFinished,
    RunStatus,
    StepTaken,
    StopRequest,
    Usage,
    new_id,
)
from subagents.supervision.core import SupervisorCore
from subagents.supervision.effects import StartRun, StopAgent, TellOutside
from subagents.supervision.limits import Limits

from .test_core import Driven, Harness, of, told


def test_a_detached_child_outlives_its_parent_and_reports_to_the_parents_requester() -> None:
    h = Harness()
    lead = h.run("lead")
    worker = h.run("worker", lead)
    helper = h.run("critic", worker)  # an ordinary child: it ends with its parent
    detached = h.run("critic", worker, detach=True)
    record = h.store.get_run(detached)
    assert record is not None and record.detached and record.background
    effects = h.core.finished(RunFinished(run_id=worker, result="handed off"))
    assert h.status(worker) is RunStatus.COMPLETED
    assert h.status(helper) is RunStatus.CANCELLED
    assert h.status(detached) is RunStatus.RUNNING
    assert [s.run_id for s in of(effects, StopAgent)] == [helper]
    # it ends later: its parent is gone, so its outcome is mail to the parent's requester
    effects = h.core.finished(RunFinished(run_id=detached, result="late news"))
    assert h.status(detached) is RunStatus.COMPLETED
    (delivered,) = told(effects, lead, DeliverMail)
    (mail,) = delivered.mails
    assert mail.sender == detached
    assert mail.content.startswith("[detached result]")
    assert '"result":"late news"' in mail.content and f'"parent_run_id":"{worker}"' in mail.content
    assert told(effects, worker, DeliverMail) == [] and told(effects, worker, ChildDone) == []
    outcome = h.store.get_run(detached)
    assert outcome is not None and outcome.outcome is not None
    assert outcome.outcome.result == "late news"


def test_a_detached_child_of_an_ended_root_is_kept_in_the_store_only() -> None:
    h = Harness()
    lead = h.run("lead")
    detached = h.run("worker", lead, detach=True)
    h.core.finished(RunFinished(run_id=lead, result="done"))
    assert h.status(detached) is RunStatus.RUNNING
    assert lead in h.core.runs  # its tree is held while the detached child lives
    effects = h.core.finished(RunFinished(run_id=detached, result="after"))
    assert of(effects, TellOutside) == []  # the outside's waiter is for the root
    assert h.terminal_events(detached) == [EventKind.COMPLETED]
    assert h.store.undelivered_outcomes() == []
    # nothing in the tree is live: it is forgotten at the end of that decision
    assert lead not in h.core.runs and detached not in h.core.runs


def test_a_stop_of_the_turn_leaves_detached_children_a_stop_of_the_tree_does_not() -> None:
    h = Harness()
    lead = h.run("lead")
    ordinary = h.run("worker", lead)
    detached = h.run("worker", lead, detach=True)
    below = h.run("critic", detached)
    reply, _ = h.core.stop(StopRequest(request_id=new_id("x"), run_id=lead, scope="turn"))
    assert reply.error is None and sorted(reply.stopped) == sorted([lead, ordinary])
    assert h.status(detached) is RunStatus.RUNNING and h.status(below) is RunStatus.RUNNING
    other = h.run("lead")
    kept = h.run("worker", other, detach=True)
    reply, _ = h.core.stop(StopRequest(request_id=new_id("x"), run_id=other))  # the tree
    assert sorted(reply.stopped) == sorted([other, kept])
    assert h.status(kept) is RunStatus.CANCELLED


def test_a_detached_child_is_refused_for_a_root() -> None:
    h = Harness()
    reply = h.spawn("lead", detach=True)
    assert reply.run_id is None
    assert reply.error == "detach is for a child: a root run has no parent to outlive"


def test_limits_still_bound_a_detached_child() -> None:
    h = Harness(Limits(max_depth=1))
    lead = h.run("lead")
    detached = h.run("worker", lead, detach=True)
    h.core.finished(RunFinished(run_id=lead, result="done"))
    error = h.spawn("critic", detached).error or ""
    assert error.startswith("depth limit: a child of worker would be at depth 2"), error


def test_a_detached_childs_budget_is_carved_from_its_parents_and_still_binds_it() -> None:
    h = Harness()
    lead = h.run("lead", token_budget=1000)
    spent = Usage(input_tokens=900)
    h.core._do(h.core.core.step_taken(StepTaken(run_id=lead, step=1, usage=spent)))
    detached = h.run("worker", lead, detach=True)
    record = h.store.get_run(detached)
    assert record is not None and record.token_budget == 100  # what the lead had left
    h.core.finished(RunFinished(run_id=lead, result="done"))
    assert h.status(detached) is RunStatus.RUNNING
    used = Usage(input_tokens=150, output_tokens=0)
    h.core._do(h.core.core.step_taken(StepTaken(run_id=detached, step=1, usage=used)))
    assert h.status(detached) is RunStatus.BUDGET_EXCEEDED


def test_a_restore_takes_up_a_detached_child_whose_parent_ended() -> None:
    h = Harness()
    lead = h.run("lead")
    worker = h.run("worker", lead)
    detached = h.run("critic", worker, detach=True)
    h.core.finished(RunFinished(run_id=worker, result="handed off"))
    assert h.status(detached) is RunStatus.RUNNING
    # the same store taken up by a new core (as after a crash): the detached run resumes
    again = Driven(
        SupervisorCore(
            lookup=h.specs.get,
            names=lambda: list(h.specs),
            read_run=h.store.get_run,
            limits=Limits(),
            owner=h.core.core.owner,
        ),
        h.store,
    )
    report, effects = again.restore()
    assert sorted(report.resumed) == sorted([lead, detached]) and report.cancelled == []
    assert sorted(s.record.run_id for s in of(effects, StartRun)) == sorted([lead, detached])
    assert again.runs.get(worker) is not None  # its ended parent is held above it
    effects = again.finished(RunFinished(run_id=detached, result="resumed news"))
    (delivered,) = told(effects, lead, DeliverMail)
    assert delivered.mails[0].content.startswith("[detached result]")
    assert h.terminal_events(detached) == [EventKind.COMPLETED]
