"""``run``, ``continue_run``, ``spawn_many`` and ``fan_out`` take ``spawn``'s keywords typed
(``**options: Unpack[SpawnOptions]``), so a type checker checks each caller's keywords and
their types, and an unknown keyword is a ``TypeError`` naming it, raised before anything
starts. Before, they took ``**Any`` (nothing checked a caller), and ``fan_out`` took an
unknown keyword into every job's ``spawn``, whose ``TypeError`` each job caught as its
refusal: a fan-out of refused jobs, the misspelt keyword named only in each item's error."""

from __future__ import annotations

import inspect
import typing

import pytest

from subagents import FunctionAgent, Runtime
from subagents.behaviour.function import AgentContext
from subagents.runtime import SpawnOptions

from .conftest import WAIT

pytestmark = pytest.mark.usefixtures("no_new_threads")


def echo(ctx: AgentContext) -> str:
    return ctx.task


@pytest.mark.parametrize("method", ["spawn", "run", "continue_run", "spawn_many", "fan_out"])
def test_the_keywords_of_a_root_run_are_spawns_typed_options(method: str) -> None:
    function = getattr(Runtime, method)
    [keywords] = [
        p for p in inspect.signature(function).parameters.values() if p.kind is p.VAR_KEYWORD
    ]
    hints = typing.get_type_hints(function, include_extras=True)
    assert hints[keywords.name] == typing.Unpack[SpawnOptions]


def test_fan_out_refuses_an_unknown_keyword_before_any_job_starts() -> None:
    with Runtime([FunctionAgent.create("echo", echo)]) as rt:
        unknown = r"fan_out\(\) got unexpected keyword arguments: colour"
        with pytest.raises(TypeError, match=unknown):
            rt.fan_out([("echo", "a"), ("echo", "b")], strategy="collect", colour="red")
        assert rt.runs() == []
        done = rt.fan_out([("echo", "a")], strategy="collect", wait=WAIT, label="x")
        assert done.value == ["a"]
