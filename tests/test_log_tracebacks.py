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


HOSTILE = "evil\x1b]0;pwned\x07\x1b[2J\u202eback\x9b31m"
"""A value a log line may name (a host, a task, a tool's error) that retitles the window,
clears the screen, reads backwards and starts an 8-bit CSI."""


@pytest.mark.usefixtures("restored")
def test_a_log_line_for_a_person_shows_hostile_text_escaped() -> None:
    out = io.StringIO()
    configure(level="warning", json=False, stream=out)
    get_logger("subagents.test").warning("host " + HOSTILE, host=HOSTILE, n=3)
    text = out.getvalue()
    assert not [c for c in ("\x1b", "\x07", "\u202e", "\x9b") if c in text], repr(text)
    assert "host evil\\x1b]0;pwned\\x07" in text and "\\u202eback\\x9b31m" in text, text


@pytest.mark.usefixtures("restored")
def test_a_json_log_line_keeps_hostile_text_exact() -> None:
    import json

    out = io.StringIO()
    configure(level="warning", json=True, stream=out)
    get_logger("subagents.test").warning("seen", host=HOSTILE)
    line = json.loads(out.getvalue())
    assert line["host"] == HOSTILE and "\x1b" not in out.getvalue()
