"""A spawn option given a value of the wrong TYPE is a programming error: a ``TypeError``
naming the option and the type it got, raised before anything starts, the same in
``rt.spawn``, ``rt.run`` and a function agent's ``ctx.spawn``; ``spawn_many`` refuses that
job alone (its ``AdmissionError``), the others start. Before, ``context=5`` was an
``AdmissionError`` (and in ``ctx.spawn`` a ``SpawnRefused``), ``token_budget=1.5`` too,
while an agent that is no string was a ``TypeError``: one kind of mistake, three answers.
A value of the right type that cannot be used (``timeout=-1``, ``on_failure="shrug"``) stays
a refusal (``AdmissionError``), as the command line's and an LLM's spawn tool's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from subagents import FunctionAgent, Runtime
from subagents.behaviour.function import AgentContext
from subagents.runtime import AdmissionError, RunHandle
from subagents.runtime._runtime import _ROOT_FIELDS

from .conftest import WAIT

pytestmark = pytest.mark.usefixtures("no_new_threads")

COMMON: list[tuple[str, Any, str]] = [  # (option, a value of the wrong type, the type named)
    ("context", 5, "int"),
    ("model", ["m"], "list"),
    ("label", b"x", "bytes"),
    ("timeout", "5", "str"),
    ("timeout", True, "bool"),
    ("token_budget", 1.5, "float"),
    ("token_budget", "100", "str"),
    ("cost_budget_usd", "1", "str"),
    ("on_failure", 1, "int"),
    ("max_retries", 2.0, "float"),
    ("max_retries", "x", "str"),
    ("cleanup", 1, "int"),
]
ROOT_ONLY = [("shared", 5, "int")]
CHILD_ONLY = [
    ("background", 1, "int"),
    ("detach", "yes", "str"),
    ("inherit_messages", 1, "int"),
    ("share", 5, "int"),
    ("share", ["notes", 1], "int among its key names"),  # (not "tuple": what ctx.spawn made)
]


def echo(ctx: AgentContext) -> str:
    return ctx.task


def test_every_keyword_of_spawn_is_tried_here() -> None:
    """``Runtime.spawn`` makes its request without its keywords when none is given: the
    test below shows each one given reaches the request (its bad type raised), so every
    keyword ``spawn`` takes must be among those it tries."""
    assert {option for option, _value, _got in COMMON + ROOT_ONLY} == _ROOT_FIELDS


@pytest.mark.parametrize(("option", "value", "got"), COMMON + ROOT_ONLY)
def test_a_root_spawn_option_of_the_wrong_type_is_a_type_error_naming_it(
    option: str, value: Any, got: str
) -> None:
    with Runtime({"echo": echo}) as rt:
        starts: list[Callable[..., Any]] = [
            lambda **o: rt.spawn("echo", "x", **o),
            lambda **o: rt.run("echo", "x", wait=WAIT, **o),
            lambda **o: rt.continue_run("r-any", "x", **o),  # (checked before it is looked up)
        ]
        for start in starts:
            with pytest.raises(TypeError, match=rf"^{option} must be .*, got {got}$"):
                start(**{option: value})
        assert rt.runs() == [] and rt._roots.waiting() == []  # nothing started nor waited
        jobs: list[Any] = [("echo", "bad", {option: value}), ("echo", "good")]
        bad, good = rt.spawn_many(jobs)
        assert isinstance(bad, AdmissionError)
        assert str(bad).startswith(f"job 0: {option} must be "), str(bad)
        assert str(bad).endswith(f", got {got}"), str(bad)
        assert isinstance(good, RunHandle) and good.result(timeout=WAIT).result == "good"


def test_a_right_type_that_cannot_be_used_is_still_an_admission_error() -> None:
    with Runtime({"echo": echo}) as rt:
        for start in (rt.spawn, rt.run):
            for options in ({"timeout": -1}, {"on_failure": "shrug"}, {"cleanup": "purge"}):
                with pytest.raises(AdmissionError):
                    start("echo", "x", **options)


def test_a_child_spawn_option_of_the_wrong_type_is_a_type_error_naming_it() -> None:
    """``ctx.spawn``: raised in the agent's code before anything is journaled or asked, so
    no child starts; the agent may catch it as any TypeError of a call."""
    cases = COMMON + CHILD_ONLY

    async def careless(ctx: AgentContext) -> str:
        said = []
        for option, value, _got in cases:
            try:
                await ctx.spawn("echo", "t", **{option: value})
            except TypeError as exc:
                said.append(str(exc))
            else:
                said.append(f"{option}: spawned")
        return "\n".join(said)

    with Runtime(
        [FunctionAgent.create("careless", careless), FunctionAgent.create("echo", echo)]
    ) as rt:
        outcome = rt.run("careless", "x", wait=WAIT)
        said = (outcome.result or "").split("\n")
        assert len(said) == len(cases), outcome
        for (option, _value, got), message in zip(cases, said, strict=True):
            assert message.startswith(f"{option} must be "), message
            assert message.endswith(f", got {got}"), message
        assert [r.agent for r in rt.runs(root_run_id=outcome.run_id)] == ["careless"]
