"""A user's tool's answer is cut before the model sees it (``tools/user_results.py``).

A function given as a tool that returns a huge text used to be journaled, kept in the
conversation and sent to the model whole at every later step. Real runtimes, real actors, the
offline model: what the model was shown is read back from its requests.
"""

from __future__ import annotations

import pickle
from collections.abc import Mapping
from typing import Any

import pytest

from shown import ShownModel
from subagents.behaviour.tools import Tool, ToolResult
from subagents.messages import RunStatus
from subagents.messages.conversation import Attachment
from subagents.runtime import Runtime
from subagents.tools.context import ToolContext
from subagents.tools.user_results import USER_RESULT_LIMIT, capped, cut

from .conftest import WAIT, requests_of, spec, tool_results

pytestmark = pytest.mark.usefixtures("no_new_threads")

HUGE = 1_000_000


def flood(size: int) -> str:
    """Answer ``size`` characters."""
    return "x" * size


def flood_as_result(size: int) -> ToolResult:
    """Answer ``size`` characters as an error result."""
    return ToolResult(content="y" * size, is_error=True)


def Read(file_path: str) -> str:
    """A user's Read, replacing the built-in one."""
    return "z" * HUGE


def test_a_user_tools_huge_answer_reaches_the_model_cut_with_a_note() -> None:
    model = ShownModel(
        {
            "lead": [
                {
                    "tool_calls": [
                        {"name": "flood", "input": {"size": HUGE}},
                        {"name": "flood_as_result", "input": {"size": HUGE}},
                        {"name": "flood", "input": {"size": 10}},
                        {"name": "Read", "input": {"file_path": "/etc/hostname"}},
                    ]
                },
                "done",
            ]
        }
    )
    tools = [flood, flood_as_result, Read]
    with Runtime([spec("lead")], model=model, tools=tools) as rt:
        outcome = rt.run("lead", "job", wait=WAIT)
        assert outcome.status is RunStatus.COMPLETED, outcome
        big, big_error, small, read = tool_results(requests_of(model, "lead")[1].messages[-1])
    for result, char in ((big, "x"), (big_error, "y"), (read, "z")):
        assert isinstance(result.content, str)
        kept, note = result.content.split("\n\n[output cut: ", 1)
        assert kept == char * USER_RESULT_LIMIT
        assert note.startswith(f"{HUGE:,} characters, the first {USER_RESULT_LIMIT:,} shown")
    assert big_error.is_error and not big.is_error
    assert small.content == "x" * 10


def shots() -> ToolResult:
    """Answer four attachments: a small image, an image over its limit, two PDFs over the
    limit together."""
    return ToolResult(
        content="four",
        attachments=(
            Attachment(kind="image", media_type="image/png", data="A" * 400),
            Attachment(kind="image", media_type="image/png", data="B" * 6_000_000),
            Attachment(kind="document", media_type="application/pdf", data="C" * 16_000_000),
            Attachment(kind="document", media_type="application/pdf", data="D" * 16_000_000),
        ),
    )


def test_a_user_tools_attachments_are_held_to_reads_limits_with_a_note() -> None:
    model = ShownModel({"lead": [{"tool_calls": [{"name": "shots", "input": {}}]}, "done"]})
    with Runtime([spec("lead")], model=model, tools=[shots]) as rt:
        outcome = rt.run("lead", "job", wait=WAIT)
        assert outcome.status is RunStatus.COMPLETED, outcome
        (result,) = tool_results(requests_of(model, "lead")[1].messages[-1])
    assert [a.data[0] for a in result.attachments] == ["A", "C"]
    text, image_note, pdf_note = result.content.split("\n\n")
    assert text == "four"
    assert image_note == (
        "[attachment 2 (image/png, about 4,500,000 bytes) left out: over the 3,750,000 bytes"
        " one image may be]"
    )
    assert pdf_note.startswith("[attachment 4 (application/pdf, about 12,000,000 bytes) left")
    assert "20,000,000 bytes of a tool's attachments together" in pdf_note


def test_cut_keeps_a_text_at_the_limit_and_cuts_one_over_it() -> None:
    assert cut("a" * USER_RESULT_LIMIT) == "a" * USER_RESULT_LIMIT
    over = cut("a" * (USER_RESULT_LIMIT + 1))
    assert over.startswith("a" * USER_RESULT_LIMIT + "\n\n[output cut: 100,001 characters")


def flood_runner(arguments: Mapping[str, Any], ctx: ToolContext | None) -> str:
    return flood(arguments["size"])


def test_a_capped_tool_still_pickles_and_is_capped_once() -> None:
    schema = {"type": "object", "properties": {"size": {"type": "integer"}}}
    tool = capped(Tool("flood", "Answer size characters.", schema, flood_runner))
    assert capped(tool) is tool
    again = pickle.loads(pickle.dumps(tool))
    assert len(again.call({"size": HUGE})) < USER_RESULT_LIMIT + 200
    assert again.call({"size": 3}) == "xxx"
