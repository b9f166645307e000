"""User code that raises an exception whose ``str`` raises in turn (a custom exception
class whose ``__str__`` reads an attribute it never set: a common slip): the run fails at
once, its error naming the exception's type and what raised it. Before, the failure's
message, made in an ``except``, raised again: a function agent's or a model's run was never
failed (its actor stopped, the requester hearing ``timed_out`` only at the deadline: these
tests wait ``WAIT``, far less than the default 300 s, so they failed by ``TimeoutError``),
and a tool's run failed with the ``AttributeError`` alone, the tool unnamed."""

from __future__ import annotations

from typing import Any

import pytest

from subagents import AgentSpec, FunctionAgent, Runtime, ScriptedModel
from subagents.behaviour.function import AgentContext
from subagents.messages import ModelRequest, ModelResponse, RunStatus, ToolResultBlock
from subagents.models.base import CancelSignal
from subagents.store.memory import MemoryStore
from subagents.tools.errors import ToolError

from .conftest import WAIT

pytestmark = pytest.mark.usefixtures("no_new_threads")


class Broken(Exception):
    """Its ``str`` raises ``AttributeError``: ``msg`` is never set."""

    msg_name = "msg"

    def __str__(self) -> str:
        return str(getattr(self, self.msg_name))


def breaks() -> str:
    """A tool that raises a Broken."""
    raise Broken("tool")


class BrokenToolError(ToolError):
    """A tool's error for the model whose ``str`` raises, as ``Broken``'s."""

    def __str__(self) -> str:
        return str(self.msg)  # type: ignore[attr-defined]  # (never set)


def refuses() -> str:
    """A tool that raises a ToolError that cannot be shown."""
    raise BrokenToolError("refused")


def raises_at_once(ctx: AgentContext) -> str:
    raise Broken("function")


async def raises_later(ctx: AgentContext) -> str:
    await ctx.sleep(0)
    raise Broken("function, after an await")


class BrokenModel:
    """Raises a Broken for ``modeled``; plays scripts for the others."""

    def __init__(self) -> None:
        self.scripted = ScriptedModel(
            {
                "tooler": [{"tool_calls": [{"name": "breaks", "input": {}}]}, "never"],
                "refuser": [{"tool_calls": [{"name": "refuses", "input": {}}]}, "went on"],
            }
        )

    def complete(
        self,
        request: ModelRequest,
        *,
        deadline: float | None = None,
        cancel: CancelSignal | None = None,
    ) -> ModelResponse:
        if request.agent == "modeled":
            raise Broken("model")
        return self.scripted.complete(request, deadline=deadline, cancel=cancel)


AGENTS: list[Any] = [
    FunctionAgent.create("raises_at_once", raises_at_once),
    FunctionAgent.create("raises_later", raises_later),
    AgentSpec(name="modeled", description="m"),
    AgentSpec(name="tooler", description="t", tools=["breaks"]),
    AgentSpec(name="refuser", description="r", tools=["refuses"]),
]


_SHOWN = "Broken: <exception str() failed>"


@pytest.mark.parametrize(
    ("agent", "kind", "error"),
    [
        ("raises_at_once", "crash", _SHOWN),
        ("raises_later", "crash", _SHOWN),
        ("modeled", "crash", _SHOWN),
        ("tooler", "tool_crashed", f"tool breaks raised {_SHOWN}"),
    ],
)
def test_an_error_whose_str_raises_fails_its_run_at_once_naming_it(
    agent: str, kind: str, error: str
) -> None:
    with Runtime(AGENTS, model=BrokenModel(), tools=[breaks, refuses], store=MemoryStore()) as rt:
        outcome = rt.run(agent, "go", wait=WAIT)
        assert (outcome.status, outcome.error_kind, outcome.error) == (
            RunStatus.FAILED,
            kind,
            error,
        )


def test_a_tool_error_whose_str_raises_is_still_the_models_error_answer() -> None:
    """A ``ToolError`` is the model's to read (an error answer, the run goes on); one whose
    ``str`` raised failed the run instead (``crash``, the ``AttributeError``)."""
    with Runtime(AGENTS, model=BrokenModel(), tools=[breaks, refuses], store=MemoryStore()) as rt:
        outcome = rt.run("refuser", "go", wait=WAIT)
        assert (outcome.status, outcome.result) == (RunStatus.COMPLETED, "went on")
        conversation = rt.store.load_checkpoint(outcome.run_id)
        assert conversation is not None
        shown = [
            block.content
            for message in conversation.messages
            for block in message.content
            if isinstance(block, ToolResultBlock)
        ]
        assert shown == ["<exception str() failed>"]


class BrokenRuntimeError(RuntimeError):
    """A ``RuntimeError`` whose ``str`` raises, as ``Broken``'s: a function agent's error
    of this class is first read for asyncio's "no running event loop" (``bad_await``)."""

    def __str__(self) -> str:
        return str(self.msg)  # type: ignore[attr-defined]  # (never set)


class QuitUnshowable(SystemExit):
    """A ``SystemExit`` whose ``repr`` raises (the log line of a function's ``BaseException``
    shows it)."""

    def __repr__(self) -> str:
        raise ValueError("no repr")


async def raises_runtime_later(ctx: AgentContext) -> str:
    await ctx.sleep(0)
    raise BrokenRuntimeError("function, after an await")


def quits_unshowable(ctx: AgentContext) -> str:
    raise QuitUnshowable(3)


@pytest.mark.parametrize(
    ("agent", "kind", "error"),
    [
        ("raises_runtime_later", "crash", "BrokenRuntimeError: <exception str() failed>"),
        (
            "quits_unshowable",
            "base_exception",
            "function agent quits_unshowable raised QuitUnshowable: 3",
        ),
    ],
)
def test_a_function_agents_unshowable_error_is_the_one_named(
    agent: str, kind: str, error: str
) -> None:
    """Before, the run failed naming the error that showing it raised: the ``str`` read by
    ``bad_await`` (``AttributeError: ... 'msg'``), the ``repr`` of the function's log line
    (``ValueError: no repr``), each as a ``crash``."""
    agents = [
        FunctionAgent.create("raises_runtime_later", raises_runtime_later),
        FunctionAgent.create("quits_unshowable", quits_unshowable),
    ]
    with Runtime(agents, store=MemoryStore()) as rt:
        outcome = rt.run(agent, "go", wait=WAIT)
        assert (outcome.status, outcome.error_kind, outcome.error) == (
            RunStatus.FAILED,
            kind,
            error,
        )
