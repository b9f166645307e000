"""A model that repeats tool-call ids (a buggy or hostile backend) against approvals kept in
the store: the approval a person answers is the one they saw.

- Across turns: a later call under an id an earlier call had got its own approval (the
  step is part of the approval's id). Before, it got the earlier approval's id, the store
  found that approval answered and posted its answer again: the second command ran with
  nobody asked.
- In one response: the LLM turn already renames a repeated id (``toolu_same_2``), so each
  call is asked on its own, its answer running that call only (a guard).

Real actors, a real SQLite file, answered from the CLI (``subagents approve`` in a process
of its own), the scripted model under a model that gives every call one id.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from subagents.messages import ModelRequest, ModelResponse, RunStatus, ToolUseBlock
from subagents.models.scripted import ScriptedModel

from .conftest import WAIT
from .test_store_approvals import Asks, appender, runtime, store_beside

SAME = "toolu_same"


class OneId:
    """The scripted model's turns, every tool call's id replaced by ``SAME``."""

    def __init__(self, script: dict[str, list[Any]]) -> None:
        self.scripted = ScriptedModel(script)

    def complete(self, request: ModelRequest, **options: Any) -> ModelResponse:
        response = self.scripted.complete(request, **options)
        content = tuple(
            ToolUseBlock(id=SAME, name=b.name, input=b.input) if isinstance(b, ToolUseBlock) else b
            for b in response.content
        )
        return ModelResponse(
            content=content, stop_reason=response.stop_reason, usage=response.usage
        )


def _approve(state: Path, approval_id: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "subagents.cli.main", "approve", approval_id, "--state", str(state)],
        capture_output=True,
        text=True,
        timeout=WAIT,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_a_repeated_id_in_a_later_turn_is_asked_anew(tmp_path: Path) -> None:
    model = OneId({"worker": [appender("one"), appender("two"), {"text": "done"}]})
    with runtime(tmp_path, model) as rt:  # type: ignore[arg-type]
        asks = Asks(rt)
        handle = rt.spawn("worker", "count")
        first = asks.wait(1)
        _approve(store_beside(tmp_path), first)
        second = asks.wait(2)
        assert second != first
        (pending,) = rt.approvals()
        assert (pending.approval_id, pending.input) == (
            second,
            {"command": "echo two >> count.txt"},
        )
        assert (tmp_path / "count.txt").read_text() == "one\n"  # the second waits for its answer
        _approve(store_beside(tmp_path), second)
        assert handle.result(timeout=WAIT).status is RunStatus.COMPLETED
    assert (tmp_path / "count.txt").read_text() == "one\ntwo\n"


def test_two_calls_of_one_response_under_one_id_are_asked_each_with_its_own_input(
    tmp_path: Path,
) -> None:
    """(A guard, green before too: the LLM turn renames an id repeated within one response,
    ``toolu_same_2``, so each call is asked on its own.) Each approval shows its own call,
    and the answer to one runs that call only."""
    both = {"tool_calls": [*appender("one")["tool_calls"], *appender("two")["tool_calls"]]}
    model = OneId({"worker": [both, {"text": "done"}]})
    with runtime(tmp_path, model) as rt:  # type: ignore[arg-type]
        asks = Asks(rt)
        handle = rt.spawn("worker", "count")
        asks.wait(2)
        shown = {a.approval_id: a.input["command"] for a in rt.approvals()}
        assert sorted(shown.values()) == ["echo one >> count.txt", "echo two >> count.txt"]
        (two,) = (i for i, command in shown.items() if "two" in command)
        _approve(store_beside(tmp_path), two)
        (left,) = rt.approvals()
        assert left.input == {"command": "echo one >> count.txt"}
        rt.answer(left.approval_id, False, "not that one")
        assert handle.result(timeout=WAIT).status is RunStatus.COMPLETED
    assert (tmp_path / "count.txt").read_text() == "two\n"  # only the call answered yes ran
