"""The core's bulk decisions, without threads: ``spawn_many`` (many admissions, one
decision) and ``stop_all`` at close (every live run ended in one pass, ``close_all``)."""

from __future__ import annotations

from subagents.messages import (
    ChildDone,
    EventKind,
    MailState,
    RunFinished,
    RunStatus,
    SpawnReply,
    SpawnRequest,
    WaitingChanged,
    new_id,
)
from subagents.store.writes import OutcomeDelivered, SaveOutcome
from subagents.supervision.effects import (
    DisarmDeadline,
    Publish,
    StartRun,
    StopAgent,
    Tell,
    TellOutside,
)
from subagents.supervision.limits import Limits

from .test_core import Harness, of


def request(agent: str, task: str = "t") -> SpawnRequest:
    return SpawnRequest(request_id=new_id("q"), agent=agent, task=task)


def test_spawn_many_admits_queues_and_refuses_each_alone_in_one_decision() -> None:
    h = Harness(Limits(max_concurrency=2, queue_bound=1))
    reqs = [
        request("lead"),
        request("ghost"),
        request("worker"),
        request("critic"),
        request("lead"),
    ]
    decision = h.core._do(h.core.core.spawn_many(reqs))
    replies: tuple[SpawnReply, ...] = decision.reply
    assert [r.request_id for r in replies] == [r.request_id for r in reqs]
    assert [(r.run_id is not None, r.queued) for r in replies] == [
        (True, False),
        (False, False),
        (True, False),
        (True, True),
        (False, False),
    ]
    assert replies[1].error is not None and replies[1].error.startswith("unknown agent 'ghost'")
    assert replies[4].error is not None and replies[4].error.startswith("queue bound")
    admitted = [r.run_id for r in replies if r.run_id is not None]
    assert len(of(decision.effects, StartRun)) == 2  # the two that fit start; one queued
    assert [h.status(r) for r in admitted] == [
        RunStatus.RUNNING,
        RunStatus.RUNNING,
        RunStatus.QUEUED,
    ]
    # the refusals are told to the outside, as for one spawn told, not asked
    told = [e.message for e in of(decision.effects, TellOutside)]
    assert [m.request_id for m in told if isinstance(m, SpawnReply)] == [
        reqs[1].request_id,
        reqs[4].request_id,
    ]
    assert h.store.list_runs() and {r.run_id for r in h.store.list_runs()} == set(admitted)


def test_close_ends_every_live_run_once_queued_first_then_deepest_first() -> None:
    h = Harness(Limits(max_concurrency=3))
    root = h.run("lead")
    child = h.run("worker", root)
    grandchild = h.run("critic", child)
    queued = h.run("worker")
    assert h.status(queued) is RunStatus.QUEUED
    mail = h.mail(root, child, "unread")  # it will die unread
    assert mail.mail_id is not None
    decision = h.core._do(h.core.core.stop_all("runtime closed"))
    assert decision.reply == (queued, grandchild, child, root)
    for run in (root, child, grandchild, queued):
        assert h.status(run) is RunStatus.CANCELLED
        assert h.terminal_events(run) == [EventKind.CANCELLED]
        record = h.store.get_run(run)
        assert record is not None and record.outcome is not None
        assert record.outcome.error == "runtime closed"
    effects = decision.effects
    assert [s.run_id for s in of(effects, StopAgent)] == [queued, grandchild, child, root]
    done = [m.outcome for e in of(effects, TellOutside) if isinstance(m := e.message, ChildDone)]
    assert sorted(o.run_id for o in done) == sorted([root, queued])  # each root's, once
    # no outcome handed to a parent that ends with it (the root is told of its dead letter)
    assert [t for t in of(effects, Tell) if isinstance(t.message, ChildDone)] == []
    assert of(effects, StartRun) == []  # nothing queued starts while everything stops
    assert of(effects, DisarmDeadline) == []  # the timer service stops with the runtime
    assert h.store.mail_for(child)[0].state is MailState.DEAD
    assert h.core.slots.in_flight == 0 and h.core.slots.queue_length() == 0
    assert h.core.core.stop_all("again").reply == ()  # nothing is ended twice


def test_close_gives_each_runs_effects_together_in_a_cancels_order() -> None:
    """Each run's end event is published before its outcome is told to the outside, and
    that before its agent is stopped (as a cancel gives them); and a run's effects come
    together, not kind by kind (every stop after every other effect let nothing of the
    agents be freed while the rest were carried out: the GC's pacing then walked 100,000
    live runs' objects in the middle of the close)."""
    h = Harness(Limits(max_concurrency=4))
    roots = [h.run("lead") for _ in range(3)]
    child = h.run("worker", roots[0])
    effects = h.core.stop_all("runtime closed")

    def run_of(effect: object) -> str:
        if isinstance(effect, Publish):
            return effect.event.run_id
        if isinstance(effect, TellOutside) and isinstance(effect.message, ChildDone):
            return effect.message.outcome.run_id
        assert isinstance(effect, StopAgent), effect
        return effect.run_id

    by_run: dict[str, list[type]] = {}
    for effect in effects:
        by_run.setdefault(run_of(effect), []).append(type(effect))
    assert by_run == {
        **{root: [Publish, TellOutside, StopAgent] for root in roots},
        child: [Publish, StopAgent],
    }
    runs_in_order = [run_of(e) for e in effects]
    assert [r for i, r in enumerate(runs_in_order) if i == 0 or runs_in_order[i - 1] != r] == [
        child,
        *roots,
    ]  # each run's effects together: the deepest first, then in order


def test_after_a_close_the_core_holds_nothing_and_admits_by_its_limits_again() -> None:
    """What every end leaves in the core (slots, queues, idle holders, the run table and
    its trees, policies) is dropped at once by a close; a runtime that goes on after one
    (the store took writes again: ``store_recovered``) admits as a new one would."""
    h = Harness(Limits(max_concurrency=3, per_agent=1))
    root = h.run("lead")
    child = h.run("worker", root)
    queued = h.run("worker", root)  # one worker at a time
    assert h.status(queued) is RunStatus.QUEUED
    h.core.waiting_changed(WaitingChanged(run_id=root, waiting=True, attempt=1))
    assert h.core.slots.has_idle(root)
    ended = h.core._do(h.core.core.store_recovered("disk full", [])).reply
    assert ended == (queued, child, root)
    slots = h.core.slots
    assert (slots.in_flight, slots.holders(), slots.queued()) == (0, [], [])
    assert not slots.has_idle(root) and not any(slots.by_agent.values())
    assert list(h.core.runs) == [] and root not in h.core.runs.tree
    # the limits hold as for a new runtime: one worker at a time
    first, second = h.run("lead"), h.run("worker")
    assert h.status(first) is RunStatus.RUNNING and h.status(second) is RunStatus.RUNNING
    third = h.run("worker")
    assert h.status(third) is RunStatus.QUEUED
    effects = h.core.finished(RunFinished(run_id=second, result="ok", attempt=1))
    assert [s.record.run_id for s in of(effects, StartRun)] == [third]


def test_close_saves_each_outcome_delivered_in_the_write_that_keeps_it() -> None:
    """A root's outcome is handed to the outside by the close's own decision: its
    ``SaveOutcome`` says so (``delivered``), as ``Lifecycle.finish``'s does, with no
    ``OutcomeDelivered`` write after it (one write per run fewer at a close of 100,000);
    a restore hands none of them again."""
    h = Harness(Limits(max_concurrency=4))
    roots = [h.run("lead") for _ in range(3)]
    child = h.run("worker", roots[0])
    decision = h.core._do(h.core.core.stop_all("runtime closed"))
    saved = {w.outcome.run_id: w.delivered for w in decision.writes if type(w) is SaveOutcome}
    assert saved == {**{root: True for root in roots}, child: False}
    delivered = [w.run_id for w in decision.writes if type(w) is OutcomeDelivered]
    assert delivered == [child]  # a child's: handed by ``Lifecycle.deliver`` (to nobody)
    assert h.store.undelivered_outcomes() == []
    for run in (*roots, child):
        assert h.status(run) is RunStatus.CANCELLED
