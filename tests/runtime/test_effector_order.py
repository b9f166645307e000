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
from subagents.actors.timer import TimerService
from subagents.supervision.effects import Effect, StopAgent, Tell
from subagents.supervision.limits import Limits


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
