"""One validation for every entry point, and bad input bounded (issue 13 items 5-7): the
Python API refuses what the command line refuses, NaN never switches a limit off, texts have
a size cap naming the size and the cap, typed policy fields and tool names are checked."""

from __future__ import annotations

import threading
from collections.abc import Collection
from pathlib import Path

import pytest

from subagents import AgentSpec, FunctionAgent, Runtime, ScriptedModel
from subagents.behaviour.function import AgentContext, MailError, SpawnRefused
from subagents.cluster.connect import ClusterError
from subagents.definitions.errors import DefinitionError
from subagents.messages import RunStatus
from subagents.runtime import AdmissionError
from subagents.store.base import ended_in_records
from subagents.store.memory import MemoryStore
from subagents.supervision.limits import LimitError, Limits

from .conftest import WAIT

pytestmark = pytest.mark.usefixtures("no_new_threads")


def echo(ctx: AgentContext) -> str:
    return ctx.task


def test_run_and_spawn_refuse_a_timeout_above_the_maximum_and_an_empty_task() -> None:
    with Runtime({"echo": echo}) as rt:
        for start in (rt.run, rt.spawn):
            with pytest.raises(AdmissionError, match=r"timeout 99999 s is above the maximum"):
                start("echo", "x", timeout=99999)
            with pytest.raises(AdmissionError, match="the task for 'echo' is empty"):
                start("echo", "  ")
            with pytest.raises(AdmissionError, match="timeout must be a positive number"):
                start("echo", "x", timeout=float("nan"))
            with pytest.raises(TypeError, match="unexpected keyword"):
                start("echo", "x", tiemout=5)  # type: ignore[operator]
            with pytest.raises(TypeError, match="unexpected keyword arguments: parent_run_id"):
                start("echo", "x", parent_run_id="r-other")  # (a request's, not an option)
        assert rt.runs() == []  # nothing refused was recorded
        assert rt.run("echo", "fine", timeout=3600).result == "fine"


def test_a_child_asking_too_much_time_or_nothing_to_do_is_refused_the_same_way() -> None:
    async def parent(ctx: AgentContext) -> list[str]:
        errors = []
        for task, timeout in (("x", 5000.0), ("", None)):
            try:
                await ctx.spawn("echo", task, timeout=timeout)
            except SpawnRefused as exc:
                errors.append(str(exc))
        return errors

    with Runtime({"parent": parent, "echo": echo}) as rt:
        assert rt.run("parent", "go", wait=WAIT).value == [
            "timeout 5000 s is above the maximum of 3600 s (Limits.max_timeout_s)",
            "the task for 'echo' is empty: say what the agent should do",
        ]


def test_limits_may_be_a_mapping_and_an_unknown_limit_is_named() -> None:
    with Runtime({"echo": echo}, limits={"max_concurrency": 2, "timeout_s": 5}) as rt:
        assert rt.limits == Limits(max_concurrency=2, timeout_s=5)
    with pytest.raises(LimitError, match=r"unknown limit\(s\) max_concurent; known: .*max_"):
        Runtime({"echo": echo}, limits={"max_concurent": 2})
    with pytest.raises(LimitError, match="timeout_s must be in"):
        Runtime({"echo": echo}, limits={"timeout_s": float("nan")})
    with pytest.raises(TypeError, match="limits must be a Limits or a mapping"):
        Runtime({"echo": echo}, limits=5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="command_poll_s must be a finite number"):
        Runtime({"echo": echo}, command_poll_s=float("nan"))


@pytest.mark.parametrize(
    ("argument", "value", "named"),
    [
        ("hot_reload_s", 10**400, "hot_reload_s must be a finite number >= 0, got an int above"),
        ("retention_days", -(10**5000), "retention_days must be a finite number >= 0, got an int"),
        ("approval_wait_s", 10**400, "approval_wait_s must be a positive number of seconds, got"),
        ("mcp_tool_timeout", 10**400, "mcp_tool_timeout must be a positive number of seconds"),
        ("mcp_tool_timeout", "5", "mcp_tool_timeout must be a positive number of seconds, not '5'"),
        (
            "mcp_tool_timeout",
            True,
            "mcp_tool_timeout must be a positive number of seconds, not True",
        ),
    ],
    ids=["reload-huge", "retention-huge", "approval-huge", "mcp-huge", "mcp-str", "mcp-bool"],
)
def test_a_runtime_period_past_every_float_or_of_the_wrong_type_is_named(
    argument: str, value: object, named: str
) -> None:
    """(Each was an ``OverflowError``/``TypeError`` from ``math.isfinite`` naming nothing, or
    for True a timeout of one second.)"""
    with pytest.raises(ValueError, match=named):
        Runtime({"echo": echo}, **{argument: value})  # type: ignore[arg-type]


def test_a_store_or_cluster_of_the_wrong_type_is_named_and_leaves_no_thread() -> None:
    """``store=5`` was an AttributeError from inside (no ``get_run``) after a thread had
    started, left running; ``cluster=5`` an AttributeError (no ``strip``)."""
    before = set(threading.enumerate())
    with pytest.raises(TypeError, match="store must be a RunStore, a postgresql:// URL or a"):
        Runtime({"echo": echo}, store=5)  # type: ignore[arg-type]
    with pytest.raises(ClusterError, match="cluster must be a Ray address or 'auto', got 5"):
        Runtime({"echo": echo}, cluster=5)  # type: ignore[arg-type]
    assert set(threading.enumerate()) <= before


class _OldShape:
    """A store of one's own of the protocol's shape (no subclass), written before session
    31's two methods: everything else a memory store's."""

    def __init__(self) -> None:
        self._inner = MemoryStore()

    def __getattr__(self, name: str) -> object:
        if name in ("ended_by_others", "ended_among"):
            raise AttributeError(name)
        return getattr(self._inner, name)


def test_a_store_lacking_protocol_methods_is_named_before_anything_starts() -> None:
    """A store without ``ended_by_others`` or ``ended_among`` would have failed the command
    poll (an AttributeError, the runtime halted): refused at once, naming both, no thread."""
    before = set(threading.enumerate())
    with pytest.raises(TypeError, match="lacks the RunStore methods ended_among, ended_by_othe"):
        Runtime({"echo": echo}, store=_OldShape())  # type: ignore[arg-type]
    assert set(threading.enumerate()) <= before


class _Upgraded(_OldShape):
    """The same store with the two methods docs/store.md says to add ("Upgrading a store of
    one's own"): no subclass of ``RunStore``."""

    def ended_by_others(self) -> list[str] | None:
        return None

    def ended_among(self, run_ids: Collection[str]) -> list[str]:
        return ended_in_records(self, run_ids)  # type: ignore[arg-type]


def test_a_store_of_ones_own_upgraded_as_the_docs_say_runs() -> None:
    with Runtime({"echo": echo}, store=_Upgraded()) as rt:  # type: ignore[arg-type]
        assert rt.spawn("echo", "x").result(timeout=WAIT).result == "x"


@pytest.mark.parametrize(
    ("argument", "named"),
    [
        ("tools", "tools must be a collection, got int"),
        ("agent_dirs", "agent_dirs must be a collection, got int"),
        ("tool_env", "tool_env must be a collection, got int"),
        ("skills", "skills must be a collection, got int"),
        ("restore", "restore must be True, False or run ids, got 5"),
        ("model", "model must be a Model or a callable making one, got 5"),
        ("workspace", "workspace must be a folder's path, got 5"),
        ("default_model", "default_model must be a model's name, got 5"),
        ("tracer_provider", "tracer_provider must be an OpenTelemetry TracerProvider, got 5"),
    ],
)
def test_a_runtime_argument_of_the_wrong_kind_is_a_type_error_naming_it(
    argument: str, named: str
) -> None:
    """(Each was a TypeError from inside naming nothing, ``'int' object is not iterable``,
    or for ``default_model`` accepted, to fail at a run.)"""
    with pytest.raises(TypeError, match=named):
        Runtime({"echo": echo}, **{argument: 5})  # type: ignore[arg-type]


def test_two_agents_with_one_name_are_an_error_naming_both() -> None:
    def first(ctx: AgentContext) -> str:
        return "1"

    def second(ctx: AgentContext) -> str:
        return "2"

    with pytest.raises(ValueError, match=r"two agents are named 'dup': the function 'test_two"):
        Runtime([FunctionAgent.create("dup", first), FunctionAgent.create("dup", second)])
    spec = AgentSpec(name="dup", description="d")
    with pytest.raises(ValueError, match=r"an AgentSpec \(in code\) and the function"):
        Runtime([spec, FunctionAgent.create("dup", second)], model=ScriptedModel())


def test_texts_over_the_cap_are_refused_naming_their_size_and_the_cap() -> None:
    async def talker(ctx: AgentContext) -> str:
        try:
            await ctx.send(ctx.parent_run_id or "outside", "y" * 201)
        except MailError as exc:
            return str(exc)
        return "sent"

    async def boss(ctx: AgentContext) -> str:
        out = await ctx.spawn("talker", "go")
        return str(out.value)

    def verbose(ctx: AgentContext) -> str:
        return "z" * 201

    agents = {"boss": boss, "talker": talker, "verbose": verbose, "echo": echo}
    with Runtime(agents, limits=Limits(max_text_chars=200)) as rt:
        with pytest.raises(
            AdmissionError, match=r"the task is 201 characters, over the cap of 200"
        ):
            rt.run("echo", "x" * 201)
        assert rt.run("boss", "go", wait=WAIT).value == (
            "the mail is 201 characters, over the cap of 200 (Limits.max_text_chars; raise it,"
            " or hand the text over as a file)"
        )
        too_long = rt.run("verbose", "go", wait=WAIT)
        assert too_long.status is RunStatus.FAILED and too_long.error_kind == "bad_result"
        assert too_long.error is not None
        assert too_long.error.startswith("the result is 201 characters, over the cap of 200")
    over = "1,000,001 characters, over the cap of 1,000,000"  # the default cap
    with Runtime({"echo": echo}) as rt, pytest.raises(AdmissionError, match=over):
        rt.run("echo", "x" * 1_000_001)


def test_policy_fields_are_typed_and_bad_ones_stop_a_strict_runtime(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text(
        "---\nname: careful\ndescription: d\nonFailure: fail-parent\nmaxRestarts: 2\n"
        "restartPeriod: 90s\ncostBudget: '0.50'\nsharedContext: repo, style\n"
        "inheritMessages: yes\ncleanup: delete\ntools: fan_out, my_tool, Frobnicate\n---\nHi.\n"
    )

    def my_tool(x: int) -> int:
        """Adds one."""
        return x + 1

    with Runtime(agent_dirs=[tmp_path], model=ScriptedModel(), tools=[my_tool]) as rt:
        (spec,) = rt.agents()
    assert (spec.on_failure, spec.max_restarts, spec.restart_period) == ("fail_parent", 2, 90.0)
    assert (spec.cost_budget, spec.shared_context) == (0.5, ("repo", "style"))
    assert (spec.inherit_messages, spec.cleanup) == (True, "delete")
    assert spec.metadata == {}
    # the user's tool and the runtime's fan_out are known; Frobnicate is not
    with pytest.raises(DefinitionError, match=r"a\.md:11: error: careful: tools: unknown tool"):
        Runtime(agent_dirs=[tmp_path], model=ScriptedModel(), tools=[my_tool], strict=True)
    with pytest.raises(DefinitionError, match="unknown tool 'my_tool'"):
        Runtime(agent_dirs=[tmp_path], model=ScriptedModel(), strict=True)
    code = AgentSpec(name="c", description="d", on_failure="retyr")  # type: ignore[arg-type]
    with pytest.raises(DefinitionError, match="agent 'c': onFailure must be one of report"):
        Runtime([code], model=ScriptedModel())


def test_spawn_with_shared_context_that_is_no_mapping_is_named() -> None:
    """(``dict(5)`` raised "'int' object is not iterable", naming nothing.)"""
    with Runtime({"echo": echo}) as rt:
        with pytest.raises(TypeError, match="shared must be a mapping, got int"):
            rt.spawn("echo", "x", shared=5)  # type: ignore[arg-type]
        assert rt.runs() == []  # nothing was started


def test_runs_takes_a_status_by_its_name_and_names_one_that_is_none() -> None:
    """``runs(status="completed")`` iterated the string's letters and found nothing; a
    misspelt status did the same, silently."""
    with Runtime({"echo": echo}) as rt:
        done = rt.spawn("echo", "x").result(WAIT)
        assert done.status is RunStatus.COMPLETED
        assert [r.run_id for r in rt.runs(status="completed")] == [done.run_id]  # type: ignore[arg-type]
        assert [r.run_id for r in rt.runs(status=[RunStatus.COMPLETED])] == [done.run_id]
        assert rt.runs(status="failed") == []  # type: ignore[arg-type]
        with pytest.raises(ValueError, match=r"status must be among .*completed.*; got 'done'"):
            rt.runs(status="done")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="status must be a RunStatus or several, got 5"):
            rt.runs(status=5)  # type: ignore[arg-type]
