"""Runtime.run tells the supervisor instead of asking it: every way a run is not admitted
still ends the caller's wait with the right error, and leaves nothing waiting behind."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from subagents.messages import RunStatus
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime

from .conftest import WAIT, spec

pytestmark = pytest.mark.usefixtures("no_new_threads")


@pytest.mark.parametrize("timeout", ["5", [1]])
def test_a_timeout_that_is_not_a_number_is_refused_without_wait(timeout: Any) -> None:
    # Without ``wait`` run() works out how long to wait from the timeout: a timeout that is
    # not a number must reach the supervisor's refusal, not fail in that sum.
    with Runtime([spec("a")], model=ScriptedModel({})) as rt:
        with pytest.raises(TypeError, match="timeout must be a number"):  # (the call's)
            rt.run("a", "x", timeout=timeout)
        assert rt._roots.waiting() == []
        assert rt.run("a", "x", wait=WAIT).status is RunStatus.COMPLETED


def test_run_and_spawn_from_a_subscriber_leave_no_waiter() -> None:
    errors: list[BaseException] = []
    done = threading.Event()

    def subscriber(event: Any) -> None:
        if event.kind == "started" and not done.is_set():
            for start in (rt.run, rt.spawn):
                try:
                    start("a", "from a subscriber")
                except RuntimeError as exc:
                    errors.append(exc)
            done.set()

    with Runtime([spec("a")], model=ScriptedModel({})) as rt:
        rt.subscribe(subscriber)
        assert rt.run("a", "x", wait=WAIT).status is RunStatus.COMPLETED
        assert done.wait(WAIT)
        assert [("event subscriber" in str(e)) for e in errors] == [True, True]
        assert rt._roots.waiting() == []  # the refused calls registered nothing that stays
