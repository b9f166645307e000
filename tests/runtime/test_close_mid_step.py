"""A run still in a step when its runtime closes: what it reports after the supervisor has
stopped is the stop's, not a crash (no "agent crashed" error with a traceback in the log of
every program that closes a runtime while a background run works), and its record says
cancelled, as the close decided."""

from __future__ import annotations

import threading
from typing import Any

import structlog

from polling import wait_until
from subagents import Runtime
from subagents.behaviour.function import AgentContext
from subagents.logs import configure
from subagents.messages import RunStatus

WAIT = 30.0


def test_a_report_after_the_close_stopped_the_supervisor_is_dropped_not_a_crash() -> None:
    started, go_on, reported = threading.Event(), threading.Event(), threading.Event()

    def busy(ctx: AgentContext) -> str:  # in a step through the close (its thread not waited)
        started.set()
        go_on.wait(WAIT)
        try:
            ctx.subscribe("news")  # a report: the supervisor it goes to has stopped
        finally:
            reported.set()
        return "late"

    configure(level="info")  # the drop is said at info (``structlog_as_it_was`` restores)
    rt = Runtime({"busy": busy})
    logs: list[dict[str, Any]]
    try:
        run_id = rt.spawn("busy", "t").run_id
        assert started.wait(WAIT)
        supervisor = rt._hosting.supervisor._ref  # type: ignore[union-attr]
        with structlog.testing.capture_logs() as logs:
            closer = threading.Thread(target=rt.close, kwargs={"timeout": WAIT})
            closer.start()  # it cancels the run, stops the supervisor, waits for the thread
            wait_until(lambda: not supervisor.is_alive(), "the supervisor stopped", WAIT)
            go_on.set()
            assert reported.wait(WAIT)
            wait_until(  # (its handling logs after the function's ``finally``)
                lambda: any("crashed" in e["event"] or "dropped" in e["event"] for e in logs),
                "the run's thread handled its report to the stopped supervisor",
                WAIT,
            )
            closer.join(WAIT)
            assert not closer.is_alive()
    finally:
        go_on.set()
    crashed = [e for e in logs if e.get("log_level") == "error"]
    assert crashed == [], crashed
    dropped = [e for e in logs if "reports dropped" in e["event"]]
    assert [e["run_id"] for e in dropped] == [run_id]
    record = rt.store.get_run(run_id)
    assert record is not None and record.status is RunStatus.CANCELLED
