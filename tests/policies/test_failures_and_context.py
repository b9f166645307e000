"""When a child fails (report, retry, fail_parent) and the context handed down to children."""

from __future__ import annotations

from typing import Any

from subagents.behaviour.function import AgentContext, SpawnRefused
from subagents.messages import EventKind, RunStatus, TextBlock, ToolResultBlock
from subagents.runtime import Runtime

from .conftest import spec

SPAWN_WORKER = {"name": "spawn_subagent", "input": {"agent": "worker", "task": "do it"}}


def spawn_worker(**extra: Any) -> dict[str, Any]:
    return {
        "name": "spawn_subagent",
        "input": {"agent": "worker", "task": "do it", **extra},
    }


def last_tool_result(model: Any, agent: str) -> ToolResultBlock:
    request = [r for r in model.requests if r.agent == agent][-1]
    block = request.messages[-1].content[0]
    assert isinstance(block, ToolResultBlock)
    return block


# ---- on_failure -------------------------------------------------------------------------------


def test_report_is_the_default_the_parent_decides(make_runtime: Any) -> None:
    rt, model, _events = make_runtime(
        [spec("lead"), spec("worker")],
        {
            "lead": [{"tool_calls": [SPAWN_WORKER]}, "carried on"],
            "worker": [{"error": {"kind": "server", "message": "worker broke"}}],
        },
    )
    outcome = rt.run("lead", "go", wait=60)
    assert (outcome.status, outcome.result) == (RunStatus.COMPLETED, "carried on")
    result = last_tool_result(model, "lead")
    assert result.is_error and '"error":"worker broke"' in result.content


def test_retry_runs_a_failed_child_again_from_scratch(make_runtime: Any) -> None:
    rt, model, events = make_runtime(
        [spec("lead"), spec("worker", metadata={"restartBackoff": 0.001})],
        {
            "lead": [
                {"tool_calls": [spawn_worker(on_failure="retry", max_retries=2)]},
                "{results}",
            ],
            "worker": [
                {"text": "first try", "error": {"kind": "server", "message": "x"}, "fail_times": 2}
            ],
        },
    )
    outcome = rt.run("lead", "go", wait=60)
    assert outcome.status is RunStatus.COMPLETED
    [worker] = [r for r in rt.runs(root_run_id=outcome.run_id) if r.agent == "worker"]
    assert (worker.status, worker.retries, worker.restarts) == (RunStatus.COMPLETED, 2, 0)
    assert '"result":"first try"' in (outcome.result or "")
    modes = [e.data["mode"] for e in events.of(EventKind.RESTARTED, worker.run_id)]
    assert modes == ["retry", "retry"]
    # from scratch: each attempt's request held only the task
    attempts = [r for r in model.requests if r.agent == "worker"]
    assert len(attempts) == 3 and all(len(r.messages) == 1 for r in attempts)


def test_retries_exhausted_reports_the_failure(make_runtime: Any) -> None:
    rt, model, events = make_runtime(
        [
            spec("lead"),
            spec("worker", metadata={"onFailure": "retry", "maxRetries": 1, "restartBackoff": 0}),
        ],
        {
            "lead": [{"tool_calls": [SPAWN_WORKER]}, "lead saw it"],
            "worker": [{"error": {"kind": "server", "message": "always"}}],
        },
    )
    outcome = rt.run("lead", "go", wait=60)
    assert outcome.result == "lead saw it"
    [worker] = [r for r in rt.runs(root_run_id=outcome.run_id) if r.agent == "worker"]
    assert (worker.status, worker.retries) == (RunStatus.FAILED, 1)
    assert last_tool_result(model, "lead").is_error
    assert len(events.of(EventKind.RESTARTED, worker.run_id)) == 1


def test_fail_parent_fails_the_parent_with_the_childs_reason(make_runtime: Any) -> None:
    rt, model, _events = make_runtime(
        [spec("lead"), spec("worker"), spec("sibling")],
        {
            "lead": [
                {
                    "tool_calls": [
                        spawn_worker(on_failure="fail_parent"),
                        {"name": "spawn_subagent", "input": {"agent": "sibling", "task": "s"}},
                    ]
                },
                "never reached",
            ],
            "worker": [{"error": {"kind": "server", "message": "fatal"}}],
            "sibling": [{"text": "slow", "delay": 5}],
        },
    )
    outcome = rt.run("lead", "go", wait=60)
    assert outcome.status is RunStatus.FAILED
    assert outcome.error_kind == "child_failed"
    runs = {r.agent: r for r in rt.runs(root_run_id=outcome.run_id)}
    assert outcome.error == f"child worker ({runs['worker'].run_id}) failed: fatal"
    assert runs["sibling"].status is RunStatus.CANCELLED
    assert [r.agent for r in model.requests].count("lead") == 1


# ---- shared context ---------------------------------------------------------------------------


def test_named_shared_keys_are_copied_to_the_child(make_runtime: Any) -> None:
    rt, model, _events = make_runtime(
        [spec("lead"), spec("worker", metadata={"sharedContext": ["repo"]})],
        {"lead": [{"tool_calls": [spawn_worker(share=["style"])]}, "done"]},
    )
    shared = {"repo": "github.com/x/y", "style": {"tabs": False}, "secret": "k"}
    outcome = rt.run("lead", "go", shared=shared, wait=60)
    assert outcome.status is RunStatus.COMPLETED
    worker = next(r for r in rt.runs(root_run_id=outcome.run_id) if r.agent == "worker")
    assert worker.shared == {"repo": "github.com/x/y", "style": {"tabs": False}}
    [first] = [r for r in model.requests if r.agent == "worker"]
    text = first.messages[0].content[0]
    assert isinstance(text, TextBlock)
    assert text.text == (
        '<shared key="repo">"github.com/x/y"</shared>\n'
        '<shared key="style">{"tabs":false}</shared>\n\ndo it'
    )


def test_a_missing_shared_key_refuses_the_spawn_naming_the_keys(make_runtime: Any) -> None:
    rt, model, _events = make_runtime(
        [spec("lead"), spec("worker")],
        {"lead": [{"tool_calls": [spawn_worker(share=["nope"])]}, "done"]},
    )
    outcome = rt.run("lead", "go", shared={"a": 1, "b": 2}, wait=60)
    result = last_tool_result(model, "lead")
    assert result.is_error
    assert result.content == (
        f"shared context: lead ({outcome.run_id}) has no key 'nope'; its keys: a, b"
    )


def test_a_bad_policy_argument_is_a_tool_error(make_runtime: Any) -> None:
    rt, model, _events = make_runtime(
        [spec("lead"), spec("worker")],
        {"lead": [{"tool_calls": [spawn_worker(on_failure="shrug")]}, "done"]},
    )
    rt.run("lead", "go", wait=60)
    result = last_tool_result(model, "lead")
    assert result.is_error
    assert result.content.startswith("argument 'on_failure' must be one of report, retry")


def test_function_agents_read_shared_context_and_pass_keys_on() -> None:
    seen: dict[str, Any] = {}

    def child(ctx: AgentContext) -> str:
        seen.update(ctx.shared)
        return "child done"

    async def parent(ctx: AgentContext) -> str:
        done = await ctx.spawn("child", "c", share=["db"])
        try:
            await ctx.spawn("child", "c", share=["missing"])
        except SpawnRefused as exc:
            return f"{done.result}; {exc}"
        return "not refused"

    with Runtime({"parent": parent, "child": child}) as rt:
        outcome = rt.run("parent", "p", shared={"db": "sqlite", "other": 1}, wait=60)
    assert seen == {"db": "sqlite"}
    assert outcome.result is not None and outcome.result.startswith("child done; shared context:")


# ---- inherited conversation -------------------------------------------------------------------


def test_inherit_messages_starts_the_child_with_the_parents_conversation(
    make_runtime: Any,
) -> None:
    rt, model, _events = make_runtime(
        [spec("lead"), spec("worker")],
        {
            "lead": [
                {"text": "looking", "tool_calls": [{"name": "check_mailbox", "input": {}}]},
                {"text": "delegating", "tool_calls": [spawn_worker(inherit_messages=True)]},
                "lead done",
            ]
        },
    )
    outcome = rt.run("lead", "the big task", wait=60)
    assert outcome.result == "lead done"
    [child_call] = [r for r in model.requests if r.agent == "worker"]
    roles = [m.role for m in child_call.messages]
    assert roles == ["user", "assistant", "user"]  # the spawning turn itself is left out
    first = child_call.messages[0].content[0]
    assert isinstance(first, TextBlock) and first.text == "the big task"
    last = child_call.messages[-1].content
    assert isinstance(last[0], ToolResultBlock) and last[0].content == "no new mail"
    assert isinstance(last[-1], TextBlock) and last[-1].text.endswith("\n\ndo it")
    child = next(r for r in rt.runs(root_run_id=outcome.run_id) if r.agent == "worker")
    assert child.status is RunStatus.COMPLETED


def test_bad_policy_options_of_a_root_run_are_refused_clearly() -> None:
    from subagents.runtime import AdmissionError

    with Runtime({"a": lambda ctx: "x"}) as rt:
        cases = [
            ({"on_failure": "shrug"}, "on_failure must be one of report, retry, fail_parent"),
            ({"shared": {"x": object()}}, "shared context must be JSON data"),
            ({"shared": {1: "x"}}, "shared context must be a mapping of names to values"),
            ({"token_budget": 0}, "a token budget must be a positive integer, got 0"),
            ({"cost_budget_usd": -1.0}, "a cost budget must be a positive, finite number"),
            ({"cost_budget_usd": float("nan")}, "finite number of USD, got nan"),
            ({"cost_budget_usd": float("inf")}, "finite number of USD, got inf"),
            ({"max_retries": -2}, "max_retries must be an integer >= 0, got -2"),
        ]
        for options, message in cases:
            for start in (rt.spawn, rt.run):  # the request's own settings: raised at once
                try:
                    start("a", "t", **options)
                except AdmissionError as exc:
                    assert message in str(exc), (options, str(exc))
                else:
                    raise AssertionError(f"{options} was accepted")
        assert rt.run("a", "t", shared={"ok": [1, 2]}, wait=60).result == "x"
