"""The ``approval_answered`` event says a run acted on an answer: announced when the run
reports taking it (``approvals.taken``), not when the answer is told to it, so a run stopped
between the two (told, then cancelled before acting) leaves no such event and its answer is
shown ``void`` (``store/unacted_approvals.py``). The core without threads, its writes on a
real MemoryStore (``test_core.Harness``)."""

from __future__ import annotations

from subagents.messages import ApprovalTaken, EventKind, StopRequest, new_id

from .test_core import Harness


def _answered(h: Harness, run_id: str) -> list[str]:
    return [
        e.data["approval_id"]
        for e in h.store.events(run_id)
        if e.kind is EventKind.APPROVAL_ANSWERED
    ]


def _attempt(h: Harness, run_id: str) -> int:
    state = h.core.runs.get(run_id)
    assert state is not None and state.attempt > 0
    return state.attempt


def _taken(h: Harness, run_id: str, attempt: int) -> None:
    taken = ApprovalTaken(run_id=run_id, approval_id=f"ap-{run_id}", allow=True, attempt=attempt)
    h.core._do(h.core.core.approval_report(taken))


def test_an_answer_a_live_run_takes_is_announced() -> None:
    h = Harness()
    run = h.run("worker")
    _taken(h, run, _attempt(h, run))
    assert _answered(h, run) == [f"ap-{run}"]


def test_an_answer_taken_after_the_run_was_stopped_is_not_announced() -> None:
    h = Harness()
    run = h.run("worker")
    attempt = _attempt(h, run)
    h.core.stop(StopRequest(request_id=new_id("x"), run_id=run))  # told, then stopped
    _taken(h, run, attempt)  # (its late report)
    assert _answered(h, run) == []


def test_an_answer_taken_by_an_earlier_start_is_not_announced() -> None:
    h = Harness()
    run = h.run("worker")
    state = h.core.runs.get(run)
    assert state is not None
    state.attempt += 1  # (a restart: the report comes from the start before it)
    taken = ApprovalTaken(run_id=run, approval_id="ap-old", allow=True, attempt=state.attempt - 1)
    h.core._do(h.core.core.approval_report(taken))
    assert _answered(h, run) == []
