"""A logged traceback shows where an error came from, never the frames' local variables: a
run's task, prompts, mail and results are locals all over the runtime, and have no place in
a log (structlog's console renderer shows them by default, through rich)."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import pytest
import structlog

from subagents.logs import configure, get_logger


@pytest.fixture
def restored() -> Iterator[None]:
    saved: dict[str, Any] = structlog.get_config()
    try:
        yield
    finally:
        structlog.configure(**saved)


def handle(task: str) -> None:
    raise RuntimeError("the node went away")


@pytest.mark.usefixtures("restored")
def test_a_logged_traceback_names_the_error_and_shows_no_local_variables() -> None:
    out = io.StringIO()
    configure(level="warning", json=False, stream=out)
    task = "migrate the billing database with password " + "hunter" + str(2)  # not in the source
    try:
        handle(task)
    except RuntimeError:
        get_logger("subagents.test").exception("handling failed", run_id="r1")
    text = out.getvalue()
    assert "handling failed" in text and "RuntimeError" in text and "the node went away" in text
    assert "hunter2" not in text
