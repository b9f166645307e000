"""A close whose timeout a subscriber callback spent (it runs on the supervisor's thread, which
ends the runs) gives the agents' threads no time at all: its warning says they were not waited
for and what held the close, not that a function agent, tool or callback did not return."""

from __future__ import annotations

import threading
from typing import Any

import structlog

from polling import wait_until
from subagents.behaviour.function import AgentContext
from subagents.messages import Event
from subagents.runtime import Runtime

from .conftest import WAIT


def test_a_close_held_by_a_subscriber_says_the_threads_were_not_waited_for() -> None:
    started, armed = threading.Event(), threading.Event()
    let_go, done = threading.Event(), threading.Event()  # the callback; the function

    def stuck(ctx: AgentContext) -> str:  # busy through the close (its thread: not waited for)
        started.set()
        done.wait(WAIT)
        return "late"

    def slow(event: Event) -> None:
        if armed.is_set():  # the close's events: held until the close's timeout has passed
            let_go.wait(WAIT)

    rt = Runtime({"stuck": stuck})
    logs: list[dict[str, Any]]
    try:
        rt.subscribe(slow)
        rt.spawn("stuck", "t")
        assert started.wait(WAIT)
        with structlog.testing.capture_logs() as logs:
            armed.set()
            closer = threading.Thread(target=rt.close, kwargs={"timeout": 0.2})
            closer.start()
            wait_until(
                lambda: any("takes longer" in e["event"] for e in logs),
                "the close's timeout passed with the subscriber holding the supervisor",
                WAIT,
            )
            let_go.set()
            closer.join(WAIT)
            assert not closer.is_alive()
    finally:
        let_go.set()
        done.set()
    left = [e for e in logs if str(e["event"]).startswith("the runtime closed with")]
    assert len(left) == 1, logs
    assert "not waited for" in left[0]["event"]
    assert "the supervisor's thread" in left[0]["event"]
    assert "does not return" not in left[0]["event"]
