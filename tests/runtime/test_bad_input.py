"""Bad input gets a clear answer at once: a mistyped spawn, a name no definition file could
have, a subscriber calling back into the runtime."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from subagents import AdmissionError, AgentSpec, FunctionAgent, Runtime, ScriptedModel
from subagents.behaviour.function import AgentContext, SpawnRefused


def test_a_spawn_with_a_mistyped_argument_is_refused_at_once() -> None:
    async def parent(ctx: AgentContext) -> str:
        try:
            await ctx.spawn("worker", "t", timeout="5")  # type: ignore[arg-type]
        except SpawnRefused as exc:
            return f"refused: {exc}"
        return "spawned"

    worker = AgentSpec(name="worker", description="w")
    with Runtime([worker, FunctionAgent.create("parent", parent)], model=ScriptedModel()) as rt:
        outcome = rt.run("parent", "go", wait=60, timeout=60)
        assert outcome.result == "refused: timeout must be a number of seconds, got '5'"
        with pytest.raises(AdmissionError, match="context must be a string"):
            rt.spawn("worker", "t", context=123)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["", "  ", "a\x00b", "x\ny", "../up", "a\\b"])
def test_names_a_definition_file_would_refuse_are_refused_in_code(name: str) -> None:
    with pytest.raises(ValueError, match="cannot be used"):
        Runtime([AgentSpec(name=name, description="d")], model=ScriptedModel())


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
        rt.run("worker", "t", wait=60)
        assert seen.wait(60)
    assert len(errors) == 1 and "event subscriber" in str(errors[0])
