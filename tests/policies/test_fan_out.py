"""Synthesis through real runs: ``Runtime.fan_out`` and the ``fan_out`` tool of LLM agents."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from subagents.behaviour.function import AgentContext
from subagents.messages import ToolResultBlock
from subagents.runtime import Runtime
from subagents.runtime._fan_out import chain_task
from subagents.supervision.synthesis import SynthesisError

from .conftest import spec


def answer(text: str) -> Any:
    def agent(ctx: AgentContext) -> str:
        return text

    return agent


def broken(ctx: AgentContext) -> str:
    raise RuntimeError("no luck")


def test_fan_out_vote_reports_the_dissent_and_the_failure() -> None:
    agents = {"a": answer("yes"), "b": answer("yes"), "c": answer("no"), "bad": broken}
    with Runtime(agents) as rt:
        out = rt.fan_out(
            [("a", "q"), ("b", "q"), ("c", "q"), ("bad", "q"), ("ghost", "q")], strategy="vote"
        )
    assert out.value == "yes"
    assert len(out.sources) == 2
    assert out.conflicts[0].values == ("no",)
    failed = dict(out.failed)
    assert len(failed) == 2
    assert any(e.startswith("failed: RuntimeError: no luck") for e in failed.values())
    assert failed["refused:ghost"].startswith("refused: unknown agent 'ghost'")


def test_fan_out_merge_and_weighted_average_read_json_results() -> None:
    agents = {
        "x": answer('{"files": ["a.py"], "lang": "py"}'),
        "y": answer('{"files": ["b.py"], "lang": "py", "tests": 3}'),
        "cheap": answer("2"),
        "expert": answer("5"),
    }
    with Runtime(agents) as rt:
        merged = rt.fan_out([("x", "t"), ("y", "t")], strategy="merge")
        average = rt.fan_out(
            [("cheap", "t"), ("expert", "t")],
            strategy="weighted_average",
            weights={"expert": 2.0},
        )
    assert merged.value == {"files": ["a.py", "b.py"], "lang": "py", "tests": 3}
    assert merged.ok
    assert average.value == 4.0


def test_fan_out_chain_feeds_each_output_to_the_next() -> None:
    def add_one(ctx: AgentContext) -> str:
        start = ctx.task.index("<input>\n") + len("<input>\n")
        return str(int(ctx.task[start : ctx.task.index("\n</input>")]) + 1)

    with Runtime({"seed": answer("1"), "inc": add_one, "bad": broken}) as rt:
        out = rt.fan_out([("seed", "s"), ("inc", "+1"), ("inc", "+1")], strategy="chain")
        stopped = rt.fan_out([("seed", "s"), ("bad", "x"), ("inc", "+1")], strategy="chain")
    assert out.value == 3
    assert len(out.sources) == 3
    assert stopped.value is None
    assert stopped.error is not None and stopped.error.startswith("link 1 (bad) failed")
    assert len(stopped.sources) == 1  # the third link never ran


def test_chain_task_substitutes_or_appends_the_input() -> None:
    assert chain_task("fix {input} now", "x") == "fix x now"
    assert chain_task("review", "draft") == "review\n\n<input>\ndraft\n</input>"
    assert chain_task("start {input}", None) == "start "


def test_fan_out_best_pick_and_argument_errors() -> None:
    with Runtime({"s": answer("short"), "l": answer("much longer")}) as rt:
        best = rt.fan_out([("s", "t"), ("l", "t")], strategy="best_pick", scorer=len)
        with pytest.raises(SynthesisError, match="needs a scorer"):
            rt.fan_out([("s", "t")], strategy="best_pick")
        with pytest.raises(SynthesisError, match="unknown synthesis strategy 'avg'"):
            rt.fan_out([("s", "t")], strategy="avg")
        with pytest.raises(TypeError, match=r"jobs\[0\] must be an \(agent, task\) pair"):
            rt.fan_out([("s",)], strategy="vote")  # type: ignore[list-item]
    assert best.value == "much longer"


def test_fan_out_of_nothing_is_an_error_not_a_value() -> None:
    with Runtime({"s": answer("x")}) as rt:
        out = rt.fan_out([], strategy="consensus")
    assert out.value is None and out.error == "no successful inputs to synthesize"


# ---- the tool of LLM agents -------------------------------------------------------------------


def tool_result(model: Any, agent: str) -> dict[str, Any]:
    request = [r for r in model.requests if r.agent == agent][-1]
    block = request.messages[-1].content[0]
    assert isinstance(block, ToolResultBlock)
    decoded: dict[str, Any] = msgspec.json.decode(block.content)
    return decoded


def test_llm_fan_out_tool_votes_and_reports_conflicts(make_runtime: Any) -> None:
    runs = [
        {"agent": "judge_a", "task": "is it safe?"},
        {"agent": "judge_b", "task": "is it safe?"},
        {"agent": "judge_c", "task": "is it safe?"},
    ]
    rt, model, _events = make_runtime(
        [spec("lead"), spec("judge_a"), spec("judge_b"), spec("judge_c")],
        {
            "lead": [
                {"tool_calls": [{"name": "fan_out", "input": {"runs": runs, "strategy": "vote"}}]},
                "verdict: {result0}",
            ],
            "judge_a": ["safe"],
            "judge_b": ["unsafe"],
            "judge_c": ["safe"],
        },
    )
    outcome = rt.run("lead", "review", wait=60)
    body = tool_result(model, "lead")
    assert body["strategy"] == "vote" and body["value"] == "safe"
    assert body["conflicts"][0]["values"] == ["unsafe"]
    assert len(body["sources"]) == 2
    assert outcome.result is not None and outcome.result.startswith('verdict: {"strategy":"vote"')
    children = [r for r in rt.runs(root_run_id=outcome.run_id) if r.agent != "lead"]
    assert len(children) == 3 and all(r.depth == 1 for r in children)


def test_llm_fan_out_chain_and_bad_input(make_runtime: Any) -> None:
    chain = [{"agent": "writer", "task": "draft"}, {"agent": "editor", "task": "edit"}]
    rt, model, _events = make_runtime(
        [spec("lead"), spec("writer"), spec("editor")],
        {
            "lead": [
                {
                    "tool_calls": [
                        {"name": "fan_out", "input": {"runs": chain, "strategy": "chain"}}
                    ]
                },
                {"tool_calls": [{"name": "fan_out", "input": {"runs": [], "strategy": "vote"}}]},
                "done",
            ],
            "writer": ["rough text"],
            "editor": ["edited: {task}"],
        },
    )
    rt.run("lead", "go", wait=60)
    lead_calls = [r for r in model.requests if r.agent == "lead"]
    first = lead_calls[1].messages[-1].content[0]
    assert isinstance(first, ToolResultBlock) and not first.is_error
    value = msgspec.json.decode(first.content)["value"]
    assert value == "edited: edit\n\n<input>\nrough text\n</input>"
    second = lead_calls[2].messages[-1].content[0]
    assert isinstance(second, ToolResultBlock) and second.is_error
    assert second.content == "argument 'runs' must be a non-empty list of {agent, task}"
