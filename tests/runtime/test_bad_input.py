"""Bad input gets a clear answer at once: a mistyped spawn, a name no definition file could
have, a subscriber calling back into the runtime."""

from __future__ import annotations

import math
import re
import threading
from typing import Any

import pytest

from subagents import AdmissionError, AgentSpec, FunctionAgent, Runtime, ScriptedModel
from subagents.behaviour.function import AgentContext, MailError
from subagents.messages import RunStatus
from subagents.store.base import RunStore

from .conftest import WAIT


def test_a_spawn_with_a_mistyped_argument_is_refused_at_once() -> None:
    # (a wrong type is the call's mistake: a TypeError naming it, tests/runtime/
    # test_spawn_option_types.py; it was a SpawnRefused and an AdmissionError)
    async def parent(ctx: AgentContext) -> str:
        try:
            await ctx.spawn("worker", "t", timeout="5")  # type: ignore[arg-type]
        except TypeError as exc:
            return f"refused: {exc}"
        return "spawned"

    worker = AgentSpec(name="worker", description="w")
    with Runtime([worker, FunctionAgent.create("parent", parent)], model=ScriptedModel()) as rt:
        outcome = rt.run("parent", "go", wait=60, timeout=60)
        assert outcome.result == "refused: timeout must be a number of seconds, got str"
        with pytest.raises(TypeError, match="context must be a string, got int"):
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


def nested(levels: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(levels - 1):
        value = [value]
    return value


def test_a_deeply_nested_value_is_refused_naming_it_never_a_recursion_error(
    store: RunStore,
) -> None:
    """1,000 levels made msgspec raise RecursionError inside the supervisor (a shared value)
    or the run crash with it (a result); 101 levels is past the cap of 100, 100 within it."""

    def deep(ctx: AgentContext) -> Any:
        return nested(int(ctx.task))

    async def parent(ctx: AgentContext) -> str:
        outcome = await ctx.spawn("deep", "1000")
        return f"{outcome.error_kind}: {outcome.error}"

    agents = [
        AgentSpec(name="worker", description="w"),
        FunctionAgent.create("deep", deep),
        FunctionAgent.create("parent", parent),
    ]
    with Runtime(agents, model=ScriptedModel(), store=store) as rt:
        for start in (rt.run, rt.spawn):
            for levels in (1000, 101):
                with pytest.raises(
                    AdmissionError, match=r"shared\['k'\] is nested more than 100 levels deep"
                ):
                    start("worker", "t", shared={"k": nested(levels)})
        assert rt.runs() == []  # nothing refused was recorded
        shared = {"k": nested(100)}
        assert rt.run("worker", "t", shared=shared, wait=WAIT).status is RunStatus.COMPLETED
        for levels in ("1000", "101"):
            outcome = rt.run("deep", levels, wait=WAIT)
            assert outcome.status is RunStatus.FAILED
            assert outcome.error_kind == "bad_result"
            assert outcome.error == (
                "the function returned a builtins.list, which cannot be kept: it is nested"
                " more than 100 levels deep (or contains itself); flatten it, or hand it over"
                " as a file"
            )
        assert rt.run("deep", "100", wait=WAIT).value == nested(100)
        told = rt.run("parent", "go", wait=WAIT).result
        assert told is not None and told.startswith("bad_result: the function returned a")


def test_a_lone_surrogate_is_refused_naming_the_field(store: RunStore) -> None:
    """UTF-8 cannot encode a lone surrogate: a task holding one was admitted and then failed
    where it was stored (UnicodeEncodeError inside the supervisor, on SQLite)."""

    async def mailer(ctx: AgentContext) -> str:
        try:
            await ctx.send("worker", "bad \ud800 mail")
        except MailError as exc:
            return f"refused: {exc}"
        return "sent"

    def says(ctx: AgentContext) -> str:
        return "bad \udfff result"

    agents = [
        AgentSpec(name="worker", description="w"),
        FunctionAgent.create("mailer", mailer),
        FunctionAgent.create("says", says),
    ]
    with Runtime(agents, model=ScriptedModel(), store=store) as rt:
        surrogate = "a\ud800b"
        refusals = {
            "the task": {"task": surrogate},
            "the context": {"context": surrogate},
            "the label": {"label": surrogate},
            r"a text in shared\['k'\]": {"shared": {"k": [surrogate]}},
        }
        for field, asked in refusals.items():
            fields = {"task": "t", **asked}
            with pytest.raises(
                AdmissionError,
                match=rf"^{field} holds a lone surrogate \('\\ud800' at position 1\), which"
                " UTF-8 cannot encode$",
            ):
                rt.spawn("worker", **fields)
        assert rt.runs() == []
        assert rt.run("mailer", "go", wait=WAIT).result == (
            "refused: the mail holds a lone surrogate ('\\ud800' at position 4), which UTF-8"
            " cannot encode"
        )
        outcome = rt.run("says", "go", wait=WAIT)
        assert outcome.error_kind == "bad_result"
        assert outcome.error == (
            "the function returned a builtins.str, which cannot be kept: its text holds a lone"
            " surrogate ('\\udfff' at position 4), which UTF-8 cannot encode"
        )
        assert rt.run("worker", "still serving", wait=WAIT).status is RunStatus.COMPLETED


def test_a_label_is_capped_like_every_text() -> None:
    with Runtime([AgentSpec(name="worker", description="w")], model=ScriptedModel()) as rt:
        for start in (rt.run, rt.spawn):
            with pytest.raises(
                AdmissionError, match="the label is 201 characters, over the cap of 200"
            ):
                start("worker", "t", label="x" * 201)
        assert rt.runs() == []
        assert rt.run("worker", "t", label="x" * 200, wait=WAIT).status is RunStatus.COMPLETED


@pytest.mark.parametrize(
    ("label", "seen"), [("a\nb", "U+000A at position 1"), ("\x1b[2J", "U+001B")]
)
def test_a_label_is_one_line_of_printable_text(label: str, seen: str) -> None:
    with Runtime([AgentSpec(name="worker", description="w")], model=ScriptedModel()) as rt:
        message = re.escape(f"the label holds a control character ({seen}")
        with pytest.raises(AdmissionError, match=message):
            rt.spawn("worker", "t", label=label)
        assert rt.runs() == []
        assert rt.run("worker", "t", label="naïve ✓ label", wait=WAIT).status is RunStatus.COMPLETED


def test_a_nan_timeout_is_the_same_value_error_for_every_wait() -> None:
    nan = float("nan")
    with Runtime([AgentSpec(name="worker", description="w")], model=ScriptedModel()) as rt:
        handle = rt.spawn("worker", "t")
        waits = {
            "timeout": (
                lambda: handle.result(timeout=nan),
                lambda: rt.wait_any([handle], timeout=nan),
                lambda: rt.wait_all([handle], timeout=nan),
                lambda: rt.wait_ended([handle.run_id], timeout=nan),
            ),
            "wait": (lambda: rt.run("worker", "t", wait=nan),),
        }
        for name, calls in waits.items():
            for call in calls:
                with pytest.raises(
                    ValueError, match=f"^{name} must be a number of seconds or None, got nan$"
                ):
                    call()
        assert [r.run_id for r in rt.runs()] == [handle.run_id]  # run(wait=nan) started none
        assert handle.result(timeout=WAIT).status is RunStatus.COMPLETED


@pytest.mark.parametrize("seconds", [math.inf, 1e300, 1e10, 2**62])
def test_a_wait_longer_than_the_platform_can_time_is_a_wait_without_limit(
    seconds: float,
) -> None:
    """``check_timeout`` keeps infinity (and any number above 0) as seconds to wait; the
    waiter took them to a lock's ``acquire(timeout=)``, which refuses more than
    ``threading.TIMEOUT_MAX`` (~292 years) with ``OverflowError: timestamp out of range``:
    ``run(wait=math.inf)`` and ``result(timeout=math.inf)`` raised it after starting the
    run. Every wait takes such a number as no limit, as ``wait_all`` already did."""
    with Runtime([AgentSpec(name="worker", description="w")], model=ScriptedModel()) as rt:
        assert rt.run("worker", "t", wait=seconds).status is RunStatus.COMPLETED
        handle = rt.spawn("worker", "t")
        assert handle.result(timeout=seconds).status is RunStatus.COMPLETED
        done = rt.wait_any([rt.spawn("worker", "t")], timeout=seconds)
        assert done.status is RunStatus.COMPLETED


def test_a_model_answer_that_cannot_be_kept_fails_as_malformed_naming_why(
    store: RunStore,
) -> None:
    """A model's text with a lone surrogate, or a tool call's input nested past the cap, was
    taken as it was and failed where the supervisor stored the step (UnicodeEncodeError,
    RecursionError); now the run fails as a malformed response naming it."""

    def echo(x: Any) -> str:
        """Echo."""
        return "ok"

    model = ScriptedModel(
        {
            "says": ["bad \ud800 text"],
            "calls": [{"tool_calls": [{"name": "echo", "input": {"x": nested(150)}}]}, "done"],
        }
    )
    agents = [AgentSpec(name="says", description="s"), AgentSpec(name="calls", description="c")]
    with Runtime(agents, model=model, store=store, tools=[echo]) as rt:
        says = rt.run("says", "go", wait=WAIT)
        assert (says.error_kind, says.error) == (
            "model_malformed_response",
            "the model's answer cannot be kept: its text holds a lone surrogate ('\\ud800' at"
            " position 4), which UTF-8 cannot encode",
        )
        calls = rt.run("calls", "go", wait=WAIT)
        assert calls.error_kind == "model_malformed_response"
        assert calls.error == (
            "the model's answer cannot be kept: the input of its echo call is nested more than"
            " 100 levels deep (or contains itself); flatten it, or hand it over as a file"
        )


def test_a_tools_output_with_a_lone_surrogate_is_kept_as_a_terminal_shows_it(
    store: RunStore,
) -> None:
    """A tool's output holding a bad decode's lone surrogate failed in the store's encode,
    inside the supervisor (a bare UnicodeEncodeError naming no run): the run was recorded
    failed. Its output is now kept with U+FFFD in the surrogate's place (what a terminal
    shows), the model is handed that, and the run and the next one complete."""

    def echo(x: Any) -> str:
        """Echo."""
        return "out \ud800 put \udcff"

    model = ScriptedModel(
        {"calls": [{"tool_calls": [{"name": "echo", "input": {"x": 1}}]}, "done"]}
    )
    agents = [AgentSpec(name="calls", description="c")]
    with Runtime(agents, model=model, store=store, tools=[echo]) as rt:
        first = rt.run("calls", "go", wait=WAIT)
        second = rt.run("calls", "go", wait=WAIT)
        assert (first.status, first.result, second.status) == (
            RunStatus.COMPLETED,
            "done",
            RunStatus.COMPLETED,
        )
    texts = [str(request.messages[-1]) for request in model.requests]
    assert sum("'out \ufffd put \ufffd'" in text for text in texts) == 2, texts


def test_a_functions_status_or_stop_of_an_unkeepable_run_id_is_refused_naming_it(
    store: RunStore,
) -> None:
    """``ctx.status``/``ctx.stop`` of a run id holding a lone surrogate failed in the store's
    look-up (a bare UnicodeEncodeError; inside the supervisor for a stop): now a ValueError
    naming it, at the call, and the function goes on to complete."""
    said: list[str] = []

    async def fn(ctx: AgentContext) -> str:
        for call in (ctx.status, ctx.stop):
            try:
                await call("r\ud800") if call is ctx.stop else call("r\ud800")
            except ValueError as exc:
                said.append(str(exc))
        return "fine"

    with Runtime([FunctionAgent.create("fn", fn)], model=ScriptedModel(), store=store) as rt:
        outcome = rt.run("fn", "go", wait=WAIT)
        assert (outcome.status, outcome.result) == (RunStatus.COMPLETED, "fine")
    shown = (
        "no run 'r\\ud800': the run id holds a lone surrogate ('\\ud800' at position 1),"
        " which UTF-8 cannot encode"
    )
    assert said == [shown, shown]


def test_a_failure_whose_message_holds_a_lone_surrogate_is_recorded_as_a_terminal_shows_it(
    store: RunStore,
) -> None:
    """A tool or a function raising an exception whose message holds a lone surrogate (made
    from a bad decode): the run's error could not be stored, and its end was recorded with
    the store's error instead (the failure's own words lost). Kept with U+FFFD now."""

    def echo(x: Any) -> str:
        """Echo."""
        raise ValueError("bad \ud800 tool")

    async def fn(ctx: AgentContext) -> str:
        raise ValueError("bad \udcff fn")

    model = ScriptedModel({"calls": [{"tool_calls": [{"name": "echo", "input": {"x": 1}}]}]})
    agents = [AgentSpec(name="calls", description="c"), FunctionAgent.create("fn", fn)]
    with Runtime(agents, model=model, store=store, tools=[echo]) as rt:
        tool = rt.run("calls", "go", wait=WAIT)
        function = rt.run("fn", "go", wait=WAIT)
        assert (tool.status, tool.error) == (
            RunStatus.FAILED,
            "tool echo raised ValueError: bad \ufffd tool",
        )
        assert (function.status, function.error) == (
            RunStatus.FAILED,
            "ValueError: bad \ufffd fn",
        )


def test_a_run_id_with_a_lone_surrogate_is_refused_naming_it(store: RunStore) -> None:
    """A run id UTF-8 cannot encode (argv's bad bytes) names no run: every call given one
    says so at the call, as ``ctx.status`` does (they raised a bare UnicodeEncodeError from
    the store's look-up, or inside the supervisor); the runtime serves on."""
    bad = "a\udc80"
    said = re.escape(
        f"no run {bad!r}: the run id holds a lone surrogate ('\\udc80' at position 1),"
        " which UTF-8 cannot encode"
    )
    with Runtime(
        [AgentSpec(name="worker", description="w")], model=ScriptedModel(), store=store
    ) as rt:
        calls: dict[str, Any] = {
            "status": lambda: rt.status(bad),
            "stop": lambda: rt.stop(bad),
            "get": lambda: rt.get(bad),
            "tree": lambda: rt.tree(bad),
            "totals": lambda: rt.totals(bad),
            "usage": lambda: rt.usage(bad),
            "stats": lambda: rt.stats(bad),
            "attach": lambda: rt.attach(bad),
            "continue_run": lambda: rt.continue_run(bad, "go on"),
            "approvals": lambda: rt.approvals(bad),
            "runs(root_run_id)": lambda: rt.runs(root_run_id=bad),
            "runs(requester)": lambda: rt.runs(requester=bad),
            "wait_all": lambda: rt.wait_all([bad], timeout=WAIT),
        }
        for call in calls.values():
            with pytest.raises(ValueError, match=f"^{said}$"):
                call()
        with pytest.raises(ValueError, match=r"^no agent 'a\\udc80': the agent holds a lone"):
            rt.runs(agent=bad)
        assert rt.run("worker", "still serving", wait=WAIT).status is RunStatus.COMPLETED
