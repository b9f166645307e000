"""A root request with no option (``run(agent, task)``, ``spawn(agent, task)``) is checked on
the caller's thread (``RootRuns.check``) and the supervisor does not check it again
(``CheckedRoots``): whatever the caller's checks let through runs. So each way a bare request
can be wrong must be refused at once, in the words (and the error type) the same request
with an option given hears, and nothing of it recorded. (Session 26 tried a one-look check
for such requests, the options compared with their defaults as one tuple: ~1% of a trivial
run's instructions, reverted by the 2% rule; this guards any such shortcut: each of its
conditions dropped failed here or in test_one_validation.)"""

from __future__ import annotations

from typing import Any

import pytest

from subagents import Runtime
from subagents.behaviour.function import AgentContext
from subagents.runtime import AdmissionError

from .conftest import WAIT

pytestmark = pytest.mark.usefixtures("no_new_threads")


def echo(ctx: AgentContext) -> str:
    return ctx.task


WRONG: list[tuple[Any, Any, type[Exception], str]] = [
    ("echo", "", AdmissionError, "the task for 'echo' is empty"),
    ("echo", "   ", AdmissionError, "the task for 'echo' is empty"),
    ("echo", "\t\n", AdmissionError, "the task for 'echo' is empty"),
    ("", "x", AdmissionError, "no agent given"),
    (" ", "x", AdmissionError, "no agent given"),
    ("echo", "x" * 65, AdmissionError, "the task is 65 characters, over the cap of 64"),
    ("echo", "a\ud800b", AdmissionError, "the task"),
    ("echo", 5, TypeError, "task must be a string, got int"),
    (5, "x", TypeError, "agent must be a string, got int"),
]


@pytest.mark.parametrize(("agent", "task", "error", "words"), WRONG)
def test_a_bare_request_is_refused_as_one_with_an_option_is(
    agent: Any, task: Any, error: type[Exception], words: str
) -> None:
    with Runtime({"echo": echo}, limits={"max_text_chars": 64}) as rt:
        for start in (rt.run, rt.spawn):
            with pytest.raises(error, match=words) as bare:
                start(agent, task)
            with pytest.raises(error) as optioned:  # the same request, an option given
                start(agent, task, label="l")
            assert str(bare.value) == str(optioned.value)
        assert rt.runs() == []  # nothing refused was recorded


def test_a_bare_request_that_is_right_runs_as_one_with_an_option_does() -> None:
    with Runtime({"echo": echo}, limits={"max_text_chars": 64}) as rt:
        assert rt.run("echo", "x" * 64, wait=WAIT).result == "x" * 64  # at the cap
        assert rt.run("echo", " x ", wait=WAIT).result == " x "  # blank around, not blank
        assert rt.run("echo", "héllo", wait=WAIT).result == "héllo"  # not ASCII: looked into
        assert rt.run("echo", "y", wait=WAIT, label="l").result == "y"
