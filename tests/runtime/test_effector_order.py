"""``Effector.apply`` looks at a decision's effects once before carrying any out: the runs it
stops are out of the mail directory first (a parent told of its child's end before the
child's ``StopAgent`` must not find the child listed: its mail to it is refused as to any
ended run, not taken straight), and the rest are carried out in order."""

from __future__ import annotations

from typing import Any

import pykka

from subagents.actors.effector import Effector, _Live
from subagents.actors.lazy_event import LazyEvent
from subagents.actors.mail_desk import Listed, MailDesk
from subagents.actors.threads import ThreadPool
from subagents.actors.timer import TimerService
from subagents.definitions.spec import AgentSpec
from subagents.messages import RunRecord
from subagents.supervision.effects import Effect, StartRun, StopAgent, Tell
from subagents.supervision.limits import Limits

from .conftest import WAIT


class _Quiet(pykka.ThreadingActor):
    def on_receive(self, message: Any) -> None:
        return None


class _Told:
    """Where the parent's tell lands: it reads the directory as the tell is made (a real
    agent's handling may run at once on another thread)."""

    def __init__(self, desk: MailDesk) -> None:
        self.desk = desk
        self.seen: list[tuple[Any, bool]] = []

    def tell(self, message: Any) -> None:
        self.seen.append((message, self.desk.directory.get("r-child") is not None))


def _apply(effects: list[Effect]) -> tuple[list[tuple[Any, bool]], bool]:
    """What the parent was told (and whether the child was listed then), and whether the
    child is listed after ``effects``."""
    supervisor = _Quiet.start()
    timer = TimerService()
    try:
        desk = MailDesk(limits=Limits(), generation=lambda: 0, record=None)
        effector = Effector(
            supervisor=supervisor,
            timer=timer,
            behaviour_for=lambda spec: None,  # type: ignore[arg-type,return-value]
            on_outside=lambda message: None,
            on_event=lambda event: None,
            pool=None,
            mail=desk,
        )
        parent = _Told(desk)
        child = _Quiet.start()
        try:
            desk.directory.add("r-child", Listed(child, 1, "r-root"))
            desk.directory.add("r-parent", Listed(supervisor, 1, "r-root"))
            effector.live["r-parent"] = _Live(ref=parent, cancel=LazyEvent())  # type: ignore[arg-type]
            effector.apply(effects)
        finally:
            child.stop()
        assert desk.directory.get("r-parent") is not None
        return parent.seen, desk.directory.get("r-child") is not None
    finally:
        supervisor.stop()
        timer.stop()


def test_a_run_a_decision_stops_is_unlisted_before_anything_of_it_is_carried_out() -> None:
    seen, listed = _apply([Tell("r-parent", "child ended"), StopAgent("r-child")])
    assert seen == [("child ended", False)]
    assert not listed


def test_a_decision_that_stops_nothing_leaves_the_directory_as_it_is() -> None:
    seen, listed = _apply([Tell("r-parent", "one"), Tell("r-parent", "two")])
    assert seen == [("one", True), ("two", True)]  # in order, the child still listed
    assert listed


class _Idle:
    """A behaviour that does nothing: its run only waits (as a parked run does)."""

    def start(self, checkpoint: Any, pending_mail: Any, recovered: Any = ()) -> None:
        pass

    def on_message(self, message: Any) -> None:
        pass

    def unread_mail(self) -> tuple[str, ...]:
        return ()

    def close(self) -> None:
        pass


def _started_and_stopped(batches: list[list[str]]) -> tuple[bool, bool]:
    """Each of ``batches`` carried out by one ``apply`` ("start": a real agent actor of
    ``r1`` started, as a ``StartRun`` starts it, listing itself; "stop": its
    ``StopAgent``): whether ``r1`` is listed after, and whether the effector holds it."""
    supervisor = _Quiet.start()
    timer = TimerService()
    pool = ThreadPool(name="t-effector-order")
    desk = MailDesk(limits=Limits(), generation=lambda: 0, record=None)
    effector = Effector(
        supervisor=supervisor,
        timer=timer,
        behaviour_for=lambda spec: lambda port: _Idle(),
        on_outside=lambda message: None,
        on_event=lambda event: None,
        pool=pool,
        mail=desk,
    )
    start = StartRun(
        record=RunRecord(run_id="r1", agent="idle", task="t", root_run_id="r1"),
        spec=AgentSpec(name="idle", description="d"),
        deadline=0.0,
    )
    made: dict[str, Effect] = {"start": start, "stop": StopAgent("r1")}
    try:
        for batch in batches:
            effector.apply([made[kind] for kind in batch])
        return desk.directory.get("r1") is not None, "r1" in effector.live
    finally:
        effector.stop_all()
        supervisor.stop()
        timer.stop()
        assert pool.close(WAIT) == []


def test_a_run_started_and_stopped_by_one_apply_is_not_left_listed() -> None:
    """A group commit carries out the effects of every decision in it by one ``apply``: one
    decision's ``StartRun`` of a run and a later one's ``StopAgent`` of it come together.
    ``apply`` unlists the runs it stops before anything, and the start then lists its run
    again: the stop must unlist it once more (only a stop in effects that start nothing may
    skip that), or the stopped run stays listed, its mail taken straight as to a live run."""
    assert _started_and_stopped([["start", "stop"]]) == (False, False)


def test_a_run_stopped_by_an_apply_that_starts_nothing_is_unlisted() -> None:
    assert _started_and_stopped([["start"]]) == (True, True)
    assert _started_and_stopped([["start"], ["stop"]]) == (False, False)
