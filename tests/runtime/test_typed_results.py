"""Typed results: a function agent's returned value comes back as the value it returned
(decoded), in memory, through the SQLite store and after a restart; its text stays its text;
a value that cannot be encoded fails the run naming its type."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path
from typing import Any

import msgspec
import pytest

from subagents.behaviour.function import AgentContext
from subagents.messages import Outcome, RunStatus
from subagents.runtime import Runtime
from subagents.store.sqlite import SQLiteStore

from .conftest import WAIT

pytestmark = pytest.mark.usefixtures("no_new_threads")


class Point(msgspec.Struct):
    x: int
    y: float


@dataclasses.dataclass
class Box:
    label: str
    points: list[Point]


VALUES: dict[str, Any] = {
    "int": 42,
    "float": 2.5,
    "bool": True,
    "list": [1, "two", None, [3.0]],
    "dict": {"a": {"b": [1, 2]}, "ok": False},
}


def answer(value: Any) -> Any:
    def agent(ctx: AgentContext) -> Any:
        return value

    return agent


def test_a_returned_value_comes_back_typed_and_its_text_stays_text() -> None:
    agents = {name: answer(value) for name, value in VALUES.items()}
    agents |= {"text": answer("plain words"), "none": answer(None)}
    with Runtime(agents) as rt:
        for name, value in VALUES.items():
            outcome = rt.run(name, "go", wait=WAIT)
            assert outcome.typed, name
            assert outcome.value == value and type(outcome.value) is type(value), name
            assert outcome.result == msgspec.json.encode(value).decode(), name
        text = rt.run("text", "go", wait=WAIT)
        assert (text.result, text.value, text.typed) == ("plain words", "plain words", False)
        nothing = rt.run("none", "go", wait=WAIT)
        assert (nothing.result, nothing.value) == ("", None)


def test_structs_and_dataclasses_come_back_as_dicts_and_decode_as_their_type() -> None:
    box = Box(label="b", points=[Point(1, 2.5), Point(3, 4.0)])
    with Runtime({"boxer": answer(box)}) as rt:
        outcome = rt.run("boxer", "go", wait=WAIT)
    assert outcome.value == {"label": "b", "points": [{"x": 1, "y": 2.5}, {"x": 3, "y": 4.0}]}
    assert outcome.value_as(Box) == box


def test_gather_gives_outcomes_whose_values_are_typed() -> None:
    def square(ctx: AgentContext) -> int:
        return int(ctx.task) ** 2

    async def mapper(ctx: AgentContext) -> list[int]:
        outcomes: list[Outcome] = await ctx.gather(*(ctx.spawn("square", str(i)) for i in range(5)))
        values = [o.value for o in outcomes]
        assert all(type(v) is int for v in values)
        return values

    with Runtime({"mapper": mapper, "square": square}) as rt:
        assert rt.run("mapper", "go", wait=WAIT).value == [0, 1, 4, 9, 16]


def test_typed_values_round_trip_through_sqlite_across_a_restart(tmp_path: Path) -> None:
    value = {"n": [1, 2.5, None, True], "name": "x", "nested": {"k": []}}

    def child(ctx: AgentContext) -> Any:
        return value

    async def parent(ctx: AgentContext) -> Any:
        out: Outcome = await ctx.spawn("child", "go")
        return {"child": out.value, "kind": type(out.value).__name__}

    db = tmp_path / "runs.db"
    with Runtime({"parent": parent, "child": child}, store=SQLiteStore(db)) as rt:
        first = rt.run("parent", "go", wait=WAIT)
    assert first.value == {"child": value, "kind": "dict"}
    store = SQLiteStore(db)  # a new process would see exactly this
    with Runtime({"parent": parent, "child": child}, store=store) as rt:
        again = rt.get(first.run_id)
        assert again is not None and again.outcome is not None
        assert again.outcome.value == {"child": value, "kind": "dict"}
        (child_run,) = rt.runs(agent="child")
        assert child_run.outcome is not None and child_run.outcome.value == value
        # and attaching to the finished root gives the same typed outcome
        assert rt.attach(first.run_id).result(timeout=WAIT).value == first.value
    store.close()


def made(make: Any) -> Any:
    """An agent returning what ``make()`` makes when it runs (a lock does not travel to a
    cluster's node; a function making one does)."""

    def agent(ctx: AgentContext) -> Any:
        return make()

    return agent


def test_a_value_that_cannot_be_encoded_fails_the_run_naming_its_type() -> None:
    agents = {"locked": made(threading.Lock), "mixed": made(lambda: [1, object()])}
    with Runtime(agents) as rt:
        locked = rt.run("locked", "go", wait=WAIT)
        mixed = rt.run("mixed", "go", wait=WAIT)
    assert locked.status is RunStatus.FAILED and locked.error_kind == "bad_result"
    assert locked.error is not None
    assert locked.error.startswith("the function returned a _thread.lock, which cannot be")
    assert mixed.error is not None and "returned a builtins.list" in mixed.error
    assert "object is unsupported" in mixed.error
    assert locked.value is None


def test_fan_out_collect_gives_every_value_in_job_order() -> None:
    def square(ctx: AgentContext) -> int:
        if ctx.task == "bad":
            raise ValueError("not a number")
        return int(ctx.task) ** 2

    with Runtime({"square": square}) as rt:
        out = rt.fan_out([("square", str(i)) for i in range(4)], strategy="collect")
        partial = rt.fan_out([("square", "2"), ("square", "bad")], strategy="collect")
    assert out.value == [0, 1, 4, 9] and out.ok
    assert partial.value == [4, None]
    assert len(partial.failed) == 1 and "not a number" in partial.failed[0][1]
    assert not partial.ok
