"""A function agent that never returns, then ``rt.close()``: the close ends within its
``timeout`` and says what it left running.

A Python thread cannot be interrupted: a function agent blocked in a call that never returns
(a lock, a socket without a timeout) keeps its thread after its run was cancelled. The close
then waits its ``timeout`` for it and goes on; before, it did so without a word, so a program
whose close took its whole timeout could not tell why, nor that a thread of its code was
still running.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
import structlog

from subagents import FunctionAgent, Runtime, ScriptedModel
from subagents.messages import RunStatus

WAIT_S = 60.0


@pytest.fixture
def released() -> Iterator[threading.Event]:
    """Set at the end: the stuck function returns, and its thread ends."""
    event = threading.Event()
    yield event
    event.set()


def test_close_names_the_threads_a_function_that_never_returns_left_running(
    released: threading.Event,
) -> None:
    inside = threading.Event()

    def stuck(ctx: Any) -> str:
        inside.set()
        released.wait()
        return "late"

    rt = Runtime([FunctionAgent.create("stuck", stuck)], model=ScriptedModel({}))
    handle = rt.spawn("stuck", "block")
    assert inside.wait(WAIT_S)
    with structlog.testing.capture_logs() as logs:
        rt.close(timeout=0.5)
    assert handle.result(timeout=WAIT_S).status is RunStatus.CANCELLED
    left = [entry for entry in logs if entry["event"].startswith("the runtime closed with")]
    assert len(left) == 1, logs
    assert left[0]["log_level"] == "warning"
    assert left[0]["threads"] == 1
    assert "does not return" in left[0]["event"]
