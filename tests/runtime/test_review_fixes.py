"""Bad requests get clear answers at once; stops and mail for runs hosted elsewhere are passed
on; names a definition file would refuse are refused in code too."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from subagents import AdmissionError, AgentSpec, FunctionAgent, Runtime, ScriptedModel, SQLiteStore
from subagents.behaviour.function import AgentContext, SpawnRefused
from subagents.messages import RunStatus


def test_a_spawn_with_a_mistyped_argument_is_refused_at_once() -> None:
    async def parent(ctx: AgentContext) -> str:
        try:
            await ctx.spawn("worker", "t", timeout="5")  # type: ignore[arg-type]
        except SpawnRefused as exc:
            return f"refused: {exc}"
        return "spawned"

    worker = AgentSpec(name="worker", description="w")
    with Runtime([worker, FunctionAgent.create("parent", parent)], model=ScriptedModel()) as rt:
        outcome = rt.run("parent", "go", wait=10, timeout=60)
        assert outcome.result == "refused: timeout must be a number, got '5'"
        with pytest.raises(AdmissionError, match="context must be a string"):
            rt.spawn("worker", "t", context=123)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["", "  ", "a\x00b", "x\ny", "../up", "a\\b"])
def test_names_a_definition_file_would_refuse_are_refused_in_code(name: str) -> None:
    with pytest.raises(ValueError, match="cannot be used"):
        Runtime([AgentSpec(name=name, description="d")], model=ScriptedModel())


def test_stop_and_send_for_a_run_hosted_by_another_runtime_are_passed_on(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    slow = ScriptedModel(
        {
            "slow": [
                {"tool_calls": [{"name": "wait_for_message", "input": {"timeout": 30}}]},
                {"text": "got {mail_content}", "delay": 30},
            ]
        }
    )
    agents = [AgentSpec(name="slow", description="waits")]
    waiting = threading.Event()

    def on_event(event: Any) -> None:
        if event.kind == "waiting":
            waiting.set()

    with Runtime(agents, model=slow, store=SQLiteStore(db), command_poll_s=0.05) as host:
        host.subscribe(on_event)
        handle = host.spawn("slow", "s")
        assert waiting.wait(10)
        with Runtime(agents, model=slow, store=SQLiteStore(db), command_poll_s=0.05) as other:
            mail_id = other.send(handle.run_id, "hello from elsewhere")
            assert mail_id.startswith("command-")
            assert other.stop(handle.run_id) == (handle.run_id,)
        outcome = handle.result(timeout=10)
    assert outcome.status is RunStatus.CANCELLED
    assert outcome.error == "stopped from another process"
    mail = SQLiteStore(db).mail_for(handle.run_id)
    assert [m.content for m in mail] == ["hello from elsewhere"]


def test_a_stale_ending_of_an_earlier_start_does_not_end_the_restarted_run() -> None:
    starts = iter(range(1, 100))
    restarted, second_started, release = threading.Event(), threading.Event(), threading.Event()

    def child(ctx: AgentContext) -> str:
        raise RuntimeError("child boom")

    def parent(ctx: AgentContext) -> str:
        if next(starts) == 1:
            ctx.spawn("child", "x", background=True, on_failure="fail_parent")
            assert restarted.wait(10)  # still busy when the supervisor restarts the run
            return "stale result of the first start"
        second_started.set()
        assert release.wait(10)
        return "result of the second start"

    def on_event(event: Any) -> None:
        if event.kind == "restarted" and event.agent == "parent":
            restarted.set()

    agents = [
        FunctionAgent.create("parent", parent, restart="transient"),
        FunctionAgent.create("child", child),
    ]
    with Runtime(agents, model=ScriptedModel()) as rt:
        rt.subscribe(on_event)
        handle = rt.spawn("parent", "go")
        assert second_started.wait(10)
        assert not handle.done  # the first start's ending was not taken for this one
        release.set()
        outcome = handle.result(timeout=10)
    assert outcome.status is RunStatus.COMPLETED
    assert outcome.result == "result of the second start"


def test_a_subscriber_calling_the_runtime_gets_a_clear_error_not_a_30_s_hang() -> None:
    errors: list[BaseException] = []
    seen = threading.Event()

    def subscriber(event: Any) -> None:
        if event.kind == "started" and not seen.is_set():
            try:
                rt.runs()  # reads the store: allowed
                rt.spawn("worker", "from a subscriber")
            except RuntimeError as exc:
                errors.append(exc)
            seen.set()

    with Runtime([AgentSpec(name="worker", description="w")], model=ScriptedModel()) as rt:
        rt.subscribe(subscriber)
        rt.run("worker", "t", wait=10)
        assert seen.wait(5)
    assert len(errors) == 1 and "event subscriber" in str(errors[0])
