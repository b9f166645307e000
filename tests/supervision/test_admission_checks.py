"""The admission checks without threads: one ordered pipeline decides admission and the offer,
and ``max_runs_per_tree`` is one of its checks (counted per tree, kept across a restore)."""

from __future__ import annotations

import pytest

from subagents.definitions.spec import AgentSpec
from subagents.messages import RunFinished, RunStatus, SpawnReply, SpawnRequest, new_id
from subagents.store.memory import MemoryStore
from subagents.store.snapshot import read_snapshot
from subagents.supervision.admission_checks import (
    CHECKS,
    ROOT_CHECKS,
    SIBLING_CHECKS,
    Proposal,
    Standing,
    depth_limit,
    offer,
    runs_per_tree,
    spawn_rule,
)
from subagents.supervision.core import SupervisorCore
from subagents.supervision.effects import StartRun
from subagents.supervision.limits import LimitError, Limits

from .test_core import Driven, Harness, of

LIMIT = "max_runs_per_tree: the tree of"


def test_the_checks_run_in_one_order_each_named_for_its_rule() -> None:
    names = [c.__name__ for c in CHECKS]
    assert names == [
        "request_fields",
        "known_agent",
        "live_requester",
        "spawn_rule",
        "depth_limit",
        "runs_per_tree",
        "free_run_id",
    ]
    # the rules come before the tree limit: a spawn the rules refuse names the rule
    assert names.index(spawn_rule.__name__) < names.index(runs_per_tree.__name__)
    assert names.index(depth_limit.__name__) < names.index(runs_per_tree.__name__)


def test_root_checks_are_the_checks_that_can_refuse_a_root() -> None:
    # a root's request skips the checks left out of ROOT_CHECKS: each must pass any root
    # (under the tightest limits), and the rest keep CHECKS's order
    assert [c for c in CHECKS if c in ROOT_CHECKS] == list(ROOT_CHECKS)
    h = Harness(Limits(max_runs_per_tree=1, max_depth=1))
    ledger = h.core.core.admission.ledger
    taken = h.run("lead")
    for agent in ("lead", "nobody", ""):
        for run_id in (None, taken):
            req = SpawnRequest(request_id="q", agent=agent, task="t", run_id=run_id)
            proposal = Proposal(req, h.specs.get(agent), None)
            for check in CHECKS:
                if check not in ROOT_CHECKS:
                    assert check(proposal, ledger) is None, check.__name__
    # and the ones kept do refuse roots, in CHECKS's order (the first one answers)
    assert h.spawn("nobody").error == "unknown agent 'nobody'; known agents: critic, lead, worker"
    assert h.spawn("lead", run_id=taken).error == f"run id {taken} is already in use"
    assert (h.spawn("nobody", run_id=taken).error or "").startswith("unknown agent")


def test_a_tree_admits_at_most_max_runs_per_tree_runs_finished_ones_included() -> None:
    h = Harness(Limits(max_runs_per_tree=3))
    root = h.run("lead")
    first = h.run("worker", root)
    h.core.finished(RunFinished(run_id=first, result="done", attempt=1))
    assert h.status(first) is RunStatus.COMPLETED
    second = h.run("worker", root)  # the third run of the tree
    refused = h.spawn("critic", second)  # a fourth, a grandchild: refused, naming the limit
    assert refused.run_id is None and refused.error == (
        f"max_runs_per_tree: the tree of {root} has admitted 3 runs, the limit is 3"
        " (Limits.max_runs_per_tree; --max-runs-per-tree)"
    )
    assert h.spawn("critic", root).error is not None  # the finished child still counts
    other = h.run("lead")  # another root: a tree of its own
    assert h.run("worker", other)
    assert h.core.runs.tree_runs(root) == 3 and h.core.runs.tree_runs(other) == 2


def test_a_rule_refusal_is_named_before_the_tree_limit() -> None:
    lead = AgentSpec(name="lead", description="d", max_depth=1)
    worker = AgentSpec(name="worker", description="d")
    critic = AgentSpec(name="critic", description="d")
    h = Harness(Limits(max_runs_per_tree=2), lead, worker, critic)
    root = h.run("lead")
    child = h.run("worker", root)
    error = h.spawn("critic", child).error or ""
    assert error.startswith("depth limit: ")  # both refuse it; the earlier check answers


def test_a_moved_run_is_not_counted_again() -> None:
    h = Harness(Limits(max_runs_per_tree=2))
    root = h.run("lead")
    child = h.run("worker", root)
    starts = of(h.core.host_lost((root, child), "its host died"), StartRun)
    assert [s.record.run_id for s in starts] == [root, child]  # started again, as attempt 2
    assert h.core.runs.tree_runs(root) == 2
    assert [s.standing.tree_runs for s in starts] == [2, 2]


def test_the_offer_runs_the_same_checks_over_the_standing_a_run_starts_with() -> None:
    h = Harness(Limits(max_runs_per_tree=3))
    _, effects = h.spawn_effects("lead")
    (root_start,) = of(effects, StartRun)
    assert root_start.standing == Standing(tree_runs=1)
    agents = [h.specs["worker"], h.specs["critic"]]  # (an agent may not spawn itself)
    asking = h.core.runs.get(root_start.record.run_id)
    assert asking is not None
    rules = h.core.core.admission.rules
    assert offer(asking, root_start.standing, rules, agents).agents == tuple(agents)
    _, effects = h.spawn_effects("worker", asking.run_id)
    _, effects = h.spawn_effects("worker", asking.run_id)
    (last_start,) = of(effects, StartRun)
    assert last_start.standing.tree_runs == 3  # the tree is full when this run starts
    child = h.core.runs.get(last_start.record.run_id)
    assert child is not None
    full = offer(child, last_start.standing, rules, [h.specs["lead"], h.specs["critic"]])
    assert full.agents == () and not full.fan_out
    assert (full.reason or "").startswith(LIMIT)
    refused = h.spawn("critic", child.run_id)  # admission agrees, with the same text
    assert refused.error == full.reason
    # the root's standing is as old as its start: it still offers (too much, never too
    # little); admission refuses what it offers, naming the limit
    assert offer(asking, root_start.standing, rules, agents).agents == tuple(agents)
    assert (h.spawn("critic", asking.run_id).error or "").startswith(LIMIT)


def test_a_restored_tree_is_counted_from_the_store() -> None:
    h = Harness(Limits(max_runs_per_tree=3))
    root = h.run("lead")
    done = h.run("worker", root)
    h.core.finished(RunFinished(run_id=done, result="done", attempt=1))
    h.run("worker", root)
    again = SupervisorCore(
        lookup=h.specs.get,
        names=lambda: list(h.specs),
        read_run=h.store.get_run,
        limits=Limits(max_runs_per_tree=3),
        owner=h.core.core.owner,
    )
    driven = Driven(again, h.store)
    snapshot = read_snapshot(h.store, frozenset(), count_trees=True)
    assert snapshot.tree_runs == {root: 3}  # the finished child is in the store's count
    decision = driven._do(again.restore(snapshot))
    assert len(decision.reply.resumed) == 2  # the root and the unfinished child
    assert again.runs.tree_runs(root) == 3
    assert [s.standing.tree_runs for s in of(decision.effects, StartRun)] == [3, 3]
    reply, _ = driven.spawn(
        SpawnRequest(request_id=new_id("q"), agent="worker", task="t", parent_run_id=root)
    )
    assert (reply.error or "").startswith(LIMIT)


@pytest.mark.parametrize("value", [0, -1, 2.5, True])
def test_max_runs_per_tree_must_be_a_positive_integer(value: object) -> None:
    with pytest.raises(LimitError, match="max_runs_per_tree must be a positive integer"):
        Limits(max_runs_per_tree=value)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("tools", "disallowed"),
    [((), ()), (("Read", "Bash(git diff:*)"), ()), (None, ("spawn_subagent",))],
    ids=["no tools", "tools without a spawn tool", "spawn disallowed"],
)
def test_a_run_that_may_spawn_nothing_is_offered_nothing_with_admissions_reason(
    tools: tuple[str, ...] | None, disallowed: tuple[str, ...]
) -> None:
    """The offer of a run whose definition spawns no agent (a child without tools) does not
    ask every check about every agent defined; its reason is still the one admission gives,
    whichever agent the run names."""
    leaf = AgentSpec(name="leaf", description="d", tools=tools, disallowed_tools=disallowed)
    others = [AgentSpec(name=f"agent{i}", description="d") for i in range(5)]
    h = Harness(Limits(), AgentSpec(name="lead", description="d"), leaf, *others)
    _, effects = h.spawn_effects("leaf")
    (start,) = of(effects, StartRun)
    run = h.core.runs.get(start.record.run_id)
    assert run is not None
    rules = h.core.core.admission.rules
    got = offer(run, start.standing, rules, list(h.specs.values()))
    assert got.agents == () and not got.fan_out
    for name in ("lead", "agent3", "leaf"):
        assert h.spawn(name, run.run_id).error == got.reason
    assert (got.reason or "").startswith("spawn rule: leaf may not spawn subagents")


# ---- a batch of spawns (spawn_many: a step's siblings) --------------------------------------


def _batch(parent: str, stale: str) -> list[SpawnRequest]:
    """A step's spawns with every way a sibling may be refused, in among good ones: the
    spawn rule (a lead may not spawn itself), its own fields (an empty task), a run id in
    use, the tree filling up (max_runs_per_tree), a requester not running, a stale attempt."""

    def req(agent: str, task: str = "t", **kw: object) -> SpawnRequest:
        fields: dict[str, object] = {"parent_run_id": parent, "attempt": 1, **kw}
        return SpawnRequest(request_id=new_id("q"), agent=agent, task=task, **fields)  # type: ignore[arg-type]

    return [
        req("worker"),
        req("lead"),
        req("worker", ""),
        req("critic"),
        req("worker", run_id=parent),
        req("worker", parent_run_id=stale),
        req("worker", attempt=2),
        req("critic"),
        req("lead"),
        req("worker", "  "),
        *(req("worker") for _ in range(4)),  # the tree fills: the later ones refused
        req("critic"),
    ]


def _answers(replies: list[SpawnReply]) -> list[tuple[bool, str | None, bool]]:
    return [(r.run_id is not None, r.error, r.queued) for r in replies]


def test_sibling_checks_are_in_checks_order_and_read_the_request() -> None:
    # a sibling skips the checks that read only the definition and the requester; the ones
    # it keeps are those that read the request itself or the tree's growing count
    assert [c for c in CHECKS if c in SIBLING_CHECKS] == list(SIBLING_CHECKS)
    assert [c.__name__ for c in CHECKS if c not in SIBLING_CHECKS] == [
        "known_agent",
        "live_requester",
        "spawn_rule",
        "depth_limit",
    ]


def test_a_batch_answers_each_spawn_as_one_at_a_time_would() -> None:
    limits = Limits(max_runs_per_tree=7, max_children=3, queue_bound=100)
    one_by_one, batched = Harness(limits), Harness(limits)
    answers = []
    for h, together in ((one_by_one, False), (batched, True)):
        parent, stale = h.run("lead"), h.run("lead")
        h.core.finished(RunFinished(run_id=stale, result="done", attempt=1))
        reqs = _batch(parent, stale)
        if together:
            replies = list(h.core._do(h.core.core.spawn_many(reqs)).reply)
        else:
            replies = [h.core.spawn(req)[0] for req in reqs]
        named = _answers(replies)  # the two harnesses' run ids told apart only by name
        for run_id, name in ((parent, "PARENT"), (stale, "STALE")):
            named = [(a, e.replace(run_id, name) if e else e, q) for a, e, q in named]
        answers.append(named)
        assert [(r.run_id is not None) for r in replies].count(True) == 6  # the tree's 7
    assert answers[0] == answers[1]
    rule = "spawn rule: lead may not spawn itself (a definition opts in with allowSelfSpawn: true)"
    empty = "the task for 'worker' is empty: say what the agent should do"
    full = (
        "max_runs_per_tree: the tree of PARENT has admitted 7 runs, the limit is 7"
        " (Limits.max_runs_per_tree; --max-runs-per-tree)"
    )
    gone = "requesting run {} is not running"
    assert [e for _, e, _ in answers[1]] == [
        *(None, rule, empty, None, "run id PARENT is already in use"),
        *(gone.format("STALE"), gone.format("PARENT"), None, rule, empty),
        *(None, None, None, full, full),
    ]
    # the first three children run (max_children=3), the later ones admitted wait in the queue
    assert [q for admitted, _, q in answers[1] if admitted] == [False] * 3 + [True] * 3


def test_a_batch_looks_up_each_agent_once_per_requester() -> None:
    specs = {n: AgentSpec(name=n, description=f"the {n}") for n in ("lead", "worker", "critic")}
    looked_up: list[str] = []

    def lookup(name: str) -> AgentSpec | None:
        looked_up.append(name)
        return specs.get(name)

    store = MemoryStore()
    core = SupervisorCore(
        lookup=lookup,
        names=lambda: list(specs),
        read_run=store.get_run,
        limits=Limits(max_concurrency=20, max_children=5, queue_bound=100),
        clock=lambda: 1000.0,
    )
    driven = Driven(core, store)
    parents = [driven.spawn(SpawnRequest(request_id=new_id("q"), agent="lead", task="t"))[0]]
    parents.append(driven.spawn(SpawnRequest(request_id=new_id("q"), agent="lead", task="t"))[0])
    looked_up.clear()
    reqs = [
        SpawnRequest(
            request_id=new_id("q"),
            agent=agent,
            task=f"part {i}",
            parent_run_id=parent.run_id,
            attempt=1,
        )
        for i in range(20)
        for agent in ("worker", "critic")
        for parent in parents
    ]
    replies = driven._do(core.spawn_many(reqs)).reply
    assert all(r.error is None for r in replies)
    assert sum(r.queued for r in replies) == 80 - 2 * 5  # each parent's 5 run, the rest wait
    # the checks that read the definition and the requester asked once per pair, not per spawn
    assert sorted(looked_up) == ["critic", "critic", "worker", "worker"]
    looked_up.clear()
    driven.spawn(reqs[0])  # outside a batch: every check, for each spawn
    driven.spawn(reqs[0])
    assert looked_up == ["worker", "worker"]


def test_a_batch_refuses_a_request_of_bad_types_alone() -> None:
    # (its requester and agent are no key to look up: an unhashable one must not raise)
    h = Harness(Limits(queue_bound=100))
    parent = h.run("lead")
    bad: list[SpawnRequest] = [
        SpawnRequest(request_id=new_id("q"), agent=["worker"], task="t", parent_run_id=parent),  # type: ignore[arg-type]
        SpawnRequest(request_id=new_id("q"), agent="worker", task="t", parent_run_id=[parent]),  # type: ignore[arg-type]
    ]
    good = SpawnRequest(request_id=new_id("q"), agent="worker", task="t", parent_run_id=parent)
    replies = h.core._do(h.core.core.spawn_many([good, *bad, good])).reply
    assert [r.error is None for r in replies] == [True, False, False, True]
    assert [r.error for r in replies[1:3]] == [
        "agent and task must be strings, got list and str",
        f"requesting run {[parent]!r} is not running",
    ]
