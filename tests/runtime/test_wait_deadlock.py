"""Over-limit spawns wait and trees never deadlock on their limits, with real actors and threads.

Every limit queues (global, per agent, per tier, per parent); a waiting run lends its slot
to a queued run that needs it (it parks) and takes one again, ahead of new admissions, when
something wakes it. The runs working never exceed a limit: ``SlotTally`` counts the slot
holders from the event stream, and every run that works holds a slot.

The shapes are those of issue 13's reports: before, 8 roots each gathering 5 mids of one leaf
ended with 5 of 8 roots timed out; ``max_concurrency=1`` with 2 mids of 1 leaf timed out.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from gates import Tally
from subagents import FunctionAgent, Limits, Runtime, ScriptedModel
from subagents.behaviour.function import AgentContext
from subagents.behaviour.tools import SPAWN
from subagents.messages import Event, EventKind, RunStatus
from subagents.runtime import AgentLike
from subagents.supervision.parking import BRIEF_SLEEP_S

from .conftest import WAIT, SlotTally, spec

pytestmark = pytest.mark.usefixtures("no_new_threads")

LEAF_MODEL = {"leaf": [{"text": "leaf done", "delay": 0.05}]}  # a 50 ms model call


def mids_and_leaves(mids: int) -> list[AgentLike]:
    async def root(ctx: AgentContext) -> str:
        outs = await ctx.gather(*(ctx.spawn("mid", f"{ctx.task}.{i}") for i in range(mids)))
        return ",".join(str(o.status) for o in outs)

    async def mid(ctx: AgentContext) -> str:
        out = await ctx.spawn("leaf", ctx.task)
        return str(out.result)

    return [FunctionAgent.create("root", root), FunctionAgent.create("mid", mid), spec("leaf")]


@pytest.mark.parametrize("roots", [8, 16])
def test_concurrent_roots_gathering_mids_of_one_leaf_complete_on_default_limits(
    roots: int,
) -> None:
    tally = SlotTally()
    limits = Limits()
    with Runtime(mids_and_leaves(5), model=ScriptedModel(LEAF_MODEL), limits=limits) as rt:
        rt.subscribe(tally)
        handles = [rt.spawn("root", f"r{i}", timeout=60) for i in range(roots)]
        outcomes = [h.result(60) for h in handles]
    assert [o.status for o in outcomes] == [RunStatus.COMPLETED] * roots
    assert all(o.result == ",".join(["completed"] * 5) for o in outcomes)
    assert len(tally.started) == roots * 11
    assert tally.peak["global"] <= limits.max_concurrency
    assert tally.max_of("agent:") <= limits.per_agent
    assert tally.max_of("parent:") <= limits.max_children
    assert tally.parked > 0  # waiting runs lent their slots (else it would have deadlocked)


def _echo_task(ctx: AgentContext) -> str:
    return ctx.task


def _root_on_one_slot(root: Any, child: Any = _echo_task, timeout: float = WAIT) -> Any:
    """``root`` run on one slot (``max_concurrency=1``) beside a ``child`` agent, every slot
    event counted: (its outcome, the tally)."""
    tally = SlotTally()
    agents = [FunctionAgent.create("root", root), FunctionAgent.create("child", child)]
    with Runtime(agents, limits=Limits(max_concurrency=1)) as rt:
        rt.subscribe(tally)
        outcome = rt.run("root", "go", wait=WAIT, timeout=timeout)
    return outcome, tally


def test_a_single_slot_runs_a_tree_of_mids_and_leaves_one_run_at_a_time() -> None:
    tally = SlotTally()
    with Runtime(
        mids_and_leaves(2), model=ScriptedModel(LEAF_MODEL), limits=Limits(max_concurrency=1)
    ) as rt:
        rt.subscribe(tally)
        outcome = rt.run("root", "r", wait=WAIT, timeout=WAIT)
    assert outcome.status is RunStatus.COMPLETED, outcome
    assert outcome.result == "completed,completed"
    assert tally.peak["global"] == 1
    assert len(tally.started) == 5


def test_a_recursive_agent_with_a_per_agent_limit_of_one() -> None:
    tally = Tally()  # counts the runs working at once, wherever they run

    def stretch() -> None:
        with tally.counting("rec"):
            sum(range(5000))

    async def rec(ctx: AgentContext) -> int:
        stretch()
        n = int(ctx.task)
        if n == 0:
            return 1
        outs = await ctx.gather(*(ctx.spawn("rec", str(n - 1)) for _ in range(2)))
        stretch()
        return 1 + sum(int(o.result or 0) for o in outs)

    slots = SlotTally()
    agent = FunctionAgent.create("rec", rec, metadata={"allowSelfSpawn": True})
    with Runtime([agent], limits=Limits(per_agent=1, max_depth=3)) as rt:
        rt.subscribe(slots)
        outcome = rt.run("rec", "3", wait=WAIT, timeout=WAIT)
    assert outcome.status is RunStatus.COMPLETED, outcome
    assert outcome.result == "15"  # 1 + 2 + 4 + 8 runs
    assert slots.peak["agent:rec"] == 1
    assert tally.peak() == {"rec": 1}


def test_a_per_tier_limit_and_a_per_parent_limit_queue_a_nested_tree() -> None:
    async def lead(ctx: AgentContext) -> str:
        outs = await ctx.gather(*(ctx.spawn("team", f"t{i}") for i in range(3)))
        return "+".join(str(o.result) for o in outs)

    async def team(ctx: AgentContext) -> str:
        outs = await ctx.gather(*(ctx.spawn("worker", f"{ctx.task}w{i}") for i in range(3)))
        return str(len([o for o in outs if o.ok]))

    def worker(ctx: AgentContext) -> str:
        return ctx.task

    tiers: dict[str, int | None] = {"lead": 1, "team": 1, "worker": 2}
    agents = [
        FunctionAgent.create("lead", lead, tier=1),
        FunctionAgent.create("team", team, tier=1, max_children=1),
        FunctionAgent.create("worker", worker, tier=2),
    ]
    tally = SlotTally(tiers)
    limits = Limits(per_tier={1: 2, 2: 1}, max_children=2)
    with Runtime(agents, limits=limits) as rt:
        rt.subscribe(tally)
        outcome = rt.run("lead", "go", wait=WAIT, timeout=WAIT)
    assert outcome.status is RunStatus.COMPLETED, outcome
    assert outcome.result == "3+3+3"
    assert tally.peak["tier:1"] <= 2 and tally.peak["tier:2"] == 1
    assert tally.max_of("parent:") <= 2  # the lead's teams; each team's workers: 1


def test_llm_agents_waiting_on_queued_children_lend_their_slot() -> None:
    model = ScriptedModel(
        {
            "lead": [  # two mids in one turn, each spawning a leaf: 5 runs, one slot
                {
                    "tool_calls": [
                        {"name": SPAWN, "input": {"agent": "mid", "task": f"m{i}"}}
                        for i in range(2)
                    ]
                },
                "lead: {results_result}",
            ],
            "mid": [
                {"tool_calls": [{"name": SPAWN, "input": {"agent": "leaf", "task": "l"}}]},
                "mid: {results_result}",
            ],
            **LEAF_MODEL,
        }
    )
    tally = SlotTally()
    agents = [spec("lead"), spec("mid"), spec("leaf")]
    with Runtime(agents, model=model, limits=Limits(max_concurrency=1)) as rt:
        rt.subscribe(tally)
        outcome = rt.run("lead", "go", wait=WAIT, timeout=WAIT)
    assert outcome.status is RunStatus.COMPLETED, outcome
    assert outcome.result == "lead: mid: leaf done\nmid: leaf done"
    assert tally.peak["global"] == 1
    assert len(tally.started) == 5
    assert tally.parked >= 3  # the lead, then each mid, lent the one slot


def test_a_ten_thousand_child_gather_completes_on_default_limits() -> None:
    async def parent(ctx: AgentContext) -> str:
        outs = await ctx.gather(*(ctx.spawn("child", str(i)) for i in range(10_000)))
        return str(sum(int(o.result or 0) for o in outs))

    def child(ctx: AgentContext) -> str:
        return ctx.task

    tally = SlotTally()
    limits = Limits()
    agents: list[Any] = [
        FunctionAgent.create("parent", parent),
        FunctionAgent.create("child", child),
    ]
    with Runtime(agents, limits=limits) as rt:
        rt.subscribe(tally)
        outcome = rt.run("parent", "go", wait=100, timeout=100)
    assert outcome.status is RunStatus.COMPLETED, outcome
    assert outcome.result == str(sum(range(10_000)))
    assert len(tally.started) == 10_001
    assert tally.peak["global"] <= limits.max_concurrency
    assert tally.peak["agent:child"] <= limits.per_agent
    assert tally.max_of("parent:") == limits.max_children  # reached, never passed


class _AtOnce:
    """How many are inside ``with`` at once, at most (thread-safe)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = self.most = 0

    def __enter__(self) -> None:
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)

    def __exit__(self, *exc: object) -> None:
        with self.lock:
            self.now -= 1


def test_children_sleeping_briefly_keep_their_slots_and_never_park() -> None:
    """A brief sleep (``parking.BRIEF_SLEEP_S``) awaited alone is not waiting: the sleepers
    hold their slots as a model call would, so the limit bounds them (before: each lent its
    slot, parked, and asked for it back; more slept at once than the limit)."""
    asleep = _AtOnce()
    parked: list[str] = []

    async def parent(ctx: AgentContext) -> str:
        outs = await ctx.gather(*(ctx.spawn("napper", str(i)) for i in range(12)))
        return str(sum(1 for o in outs if o.ok))

    async def napper(ctx: AgentContext) -> str:
        with asleep:
            await ctx.sleep(0.01)
        return "rested"

    def on_event(event: Event) -> None:
        if event.kind is EventKind.PARKED and event.agent == "napper":
            parked.append(event.run_id)

    agents = [FunctionAgent.create("parent", parent), FunctionAgent.create("napper", napper)]
    with Runtime(agents, limits=Limits(per_agent=3)) as rt:
        rt.subscribe(on_event)
        outcome = rt.run("parent", "go", wait=WAIT, timeout=WAIT)
    assert outcome.status is RunStatus.COMPLETED, outcome
    assert outcome.result == "12"
    assert parked == []
    assert 1 <= asleep.most <= 3


def test_a_run_that_slept_briefly_lends_its_slot_when_it_then_waits_for_its_child() -> None:
    """After a brief sleep (not waiting), awaiting a child that needs the run's one slot is
    waiting: the run says so then, parks, and the child runs (no deadlock)."""

    async def root(ctx: AgentContext) -> str:
        await ctx.sleep(0.01)
        out = await ctx.spawn("child", "c")
        return f"child said {out.result}"

    outcome, tally = _root_on_one_slot(root)
    assert outcome.status is RunStatus.COMPLETED, outcome
    assert outcome.result == "child said c"
    assert tally.parked == 1 and tally.peak["global"] == 1


def test_a_long_sleep_is_waiting_and_lends_its_slot() -> None:
    """A sleep longer than ``BRIEF_SLEEP_S`` is waiting as before: a queued run takes the
    sleeper's slot while it sleeps."""
    assert BRIEF_SLEEP_S < 600

    async def sleeper(ctx: AgentContext) -> str:
        await ctx.sleep(600)
        return "woke"

    def quick(ctx: AgentContext) -> str:
        return "quick done"

    tally = SlotTally()
    agents = [FunctionAgent.create("sleeper", sleeper), FunctionAgent.create("quick", quick)]
    with Runtime(agents, limits=Limits(max_concurrency=1)) as rt:
        rt.subscribe(tally)
        asleep = rt.spawn("sleeper", "zz", timeout=WAIT * 2)
        outcome = rt.run("quick", "go", wait=WAIT, timeout=WAIT)
        assert outcome.status is RunStatus.COMPLETED, outcome
        assert rt.status(asleep.run_id).status is RunStatus.WAITING  # still asleep
    assert tally.parked == 1


def test_a_parked_parent_gathering_children_takes_their_ends_without_its_slot() -> None:
    """A parent that lent its slot (parked) records each child's end of a gather that still
    waits without asking for a slot; only the end that lets it resume does (before: a park
    and an unpark round trip per child's end, ~250 for 1,000 children at
    max_concurrency=5)."""

    async def parent(ctx: AgentContext) -> str:
        outs = await ctx.gather(*(ctx.spawn("child", str(i)) for i in range(30)))
        return str(sum(int(o.result or 0) for o in outs))

    def child(ctx: AgentContext) -> str:
        return ctx.task

    tally = SlotTally()
    agents = [FunctionAgent.create("parent", parent), FunctionAgent.create("child", child)]
    with Runtime(agents, limits=Limits(max_concurrency=3)) as rt:
        rt.subscribe(tally)
        outcome = rt.run("parent", "go", wait=WAIT, timeout=WAIT)
    assert outcome.status is RunStatus.COMPLETED, outcome
    assert outcome.result == str(sum(range(30)))
    assert tally.parked == 1  # it lent its slot once, and took it back once, to return
    assert tally.peak["global"] <= 3


@pytest.mark.parametrize("every_s", [0.05, 0.0])
def test_a_run_polling_with_brief_sleeps_for_its_queued_childs_mail_lends_its_slot(
    every_s: float,
) -> None:
    """Brief sleeps in a loop are waiting once they add up to more than ``BRIEF_SLEEP_S``
    (each counted at least ``BRIEF_SLEEP_FLOOR_S``): a root polling its mailbox every 50 ms,
    or with ``sleep(0)``, for its background child's mail, on one slot, lets the queued
    child run (before: each sleep was brief, the root never said it was waiting, was never
    asked to park, and the child queued until the root timed out)."""

    async def root(ctx: AgentContext) -> str:
        ctx.spawn("child", "c", background=True)  # not awaited: the poll below is the wait
        while not (got := ctx.mailbox()):
            await ctx.sleep(every_s)
        return got[0].content

    async def child(ctx: AgentContext) -> str:
        assert ctx.parent_run_id is not None
        await ctx.send(ctx.parent_run_id, "ready")
        return "sent"

    outcome, tally = _root_on_one_slot(root, child, timeout=20)
    assert outcome.status is RunStatus.COMPLETED, outcome
    assert outcome.result == "ready"
    assert tally.parked >= 1 and tally.peak["global"] == 1


def test_a_run_timed_out_in_a_brief_sleep_gives_its_slot_to_the_queued_run() -> None:
    """A run holding the one slot through a brief sleep (never parked for it) that times out
    meanwhile ends timed out, and its slot goes to the run queued behind it."""

    async def napper(ctx: AgentContext) -> str:
        await ctx.sleep(BRIEF_SLEEP_S * 0.9)  # longer than its timeout, still brief
        return "woke"

    def quick(ctx: AgentContext) -> str:
        return "quick done"

    tally = SlotTally()
    agents = [FunctionAgent.create("napper", napper), FunctionAgent.create("quick", quick)]
    with Runtime(agents, limits=Limits(max_concurrency=1)) as rt:
        rt.subscribe(tally)
        napping = rt.spawn("napper", "zz", timeout=BRIEF_SLEEP_S * 0.2)
        queued = rt.spawn("quick", "go", timeout=WAIT)
        assert napping.result(WAIT).status is RunStatus.TIMED_OUT
        outcome = queued.result(WAIT)
    assert outcome.status is RunStatus.COMPLETED and outcome.result == "quick done", outcome
    assert tally.parked == 0 and tally.peak["global"] == 1


def test_a_brief_sleep_gathered_with_a_child_is_waiting_and_lends_the_slot() -> None:
    """A brief sleep awaited with a child (``gather``) is waiting: on one slot the parent
    parks and its queued child runs."""

    async def root(ctx: AgentContext) -> str:
        out, _ = await ctx.gather(ctx.spawn("child", "c"), ctx.sleep(0.01))
        return f"child said {out.result}"

    outcome, tally = _root_on_one_slot(root)
    assert outcome.status is RunStatus.COMPLETED, outcome
    assert outcome.result == "child said c"
    assert tally.parked == 1 and tally.peak["global"] == 1
