"""SpawnRules without threads: one decision for the offer and for admission, with its reason."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from subagents.definitions.spec import AgentSpec
from subagents.messages import RunRecord
from subagents.supervision.admission_checks import Offer, Standing
from subagents.supervision.admission_checks import offer as spawn_offer
from subagents.supervision.limits import Limits
from subagents.supervision.spawn_rules import DepthBound, SpawnRules


def spec(name: str, **fields: object) -> AgentSpec:
    return AgentSpec(name=name, description=name, **fields)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Asking:
    """A run asking, as the checks see it: its record and definition."""

    record: RunRecord
    spec: AgentSpec


def offered(
    rules: SpawnRules,
    parent: AgentSpec,
    depth: int,
    agents: Sequence[AgentSpec],
    ancestors: Sequence[DepthBound] = (),
) -> Offer:
    """What a run of ``parent`` at ``depth`` (below ``ancestors``) is offered."""
    record = RunRecord(run_id="r1", agent=parent.name, task="t", root_run_id="r0", depth=depth)
    return spawn_offer(Asking(record, parent), Standing(ancestors=tuple(ancestors)), rules, agents)


AGENTS = [
    spec("lead", tools=("Read", "Agent(reviewer, tester)"), max_depth=1),
    spec("reviewer", type="reviewer"),
    spec("tester", type="tester"),
    spec("writer"),
]


def test_a_root_is_always_allowed_at_depth_zero() -> None:
    decision = SpawnRules(Limits(max_depth=0)).check(spec("writer"))
    assert decision.allowed and decision.depth == 0 and decision.reason is None


def test_offer_and_check_agree_for_every_pair() -> None:
    rules = SpawnRules(Limits(max_depth=3))
    for parent in AGENTS:
        names = {a.name for a in offered(rules, parent, 0, AGENTS).agents}
        for child_spec in AGENTS:
            decision = rules.check(child_spec, parent, 0)
            assert decision.allowed == (child_spec.name in names), (parent.name, child_spec.name)
            assert decision.allowed or (decision.reason or "").startswith("spawn rule: ")


def test_depth_and_max_depth_computed_once_for_offer_and_check() -> None:
    rules = SpawnRules(Limits(max_depth=3))
    lead = AGENTS[0]  # maxDepth 1: children, no grandchildren, wherever it runs
    assert rules.depth_limit(lead, 2) == 3  # min(3, 2 + 1)
    assert rules.check(AGENTS[1], lead, 2).allowed
    decision = rules.check(AGENTS[1], lead, 3)
    assert not decision.allowed and decision.depth == 4
    assert decision.reason == "depth limit: a child of lead would be at depth 4, the limit is 3"
    offer = offered(rules, lead, 3, AGENTS)
    assert offer.agents == () and offer.reason == decision.reason  # the same text: one check


def test_a_bad_setting_turns_spawning_off_naming_the_key() -> None:
    rules = SpawnRules()
    bad = spec("bad", metadata={"allowedChildTypes": 7})
    offer = offered(rules, bad, 0, AGENTS)
    assert offer.agents == ()
    assert offer.reason == (
        "spawn rule: bad may not spawn subagents: allowedChildTypes must be a list of types or a"
        " comma-separated string, got 7"
    )
    assert rules.check(AGENTS[3], bad).reason == offer.reason


def test_fan_out_comes_with_spawning_unless_disallowed() -> None:
    rules = SpawnRules()
    assert offered(rules, spec("a"), 0, AGENTS).fan_out
    assert not offered(rules, spec("b", disallowed_tools=("fan_out",)), 0, AGENTS).fan_out


def test_grants_are_read_once_per_definition_object() -> None:
    rules = SpawnRules()
    lead = AGENTS[0]
    assert rules.grant(lead) is rules.grant(lead)
    assert rules.grant(spec("lead")) is not rules.grant(lead)  # a reloaded definition: read anew


def test_every_ancestors_max_depth_bounds_the_levels_below_it() -> None:
    """``b`` (maxDepth 1) -> ``c`` -> ``d``: ``c`` has no maxDepth of its own, but ``d``
    would be b's grandchild, which b's maxDepth forbids."""
    rules = SpawnRules(Limits(max_depth=5))
    b, c, d = spec("b", max_depth=1), spec("c"), spec("d")
    above_c = [DepthBound.of(b, 0)]
    assert rules.check(c, b, 0).allowed
    decision = rules.check(d, c, 1, above_c)
    assert not decision.allowed and decision.depth == 2
    assert decision.reason == (
        "depth limit: a child of c would be at depth 2, the limit is 1"
        " (maxDepth 1 of b, at depth 0)"
    )
    assert rules.check(d, c, 1).allowed  # what was checked before: only the parent's own
    # the offer agrees when it is told the ancestors
    offer = offered(rules, c, 1, [d], above_c)
    assert offer.agents == () and offer.reason == decision.reason
    # the tightest bound wins, wherever in the chain it is; a looser one below changes nothing
    a = spec("a", max_depth=3)
    loose = spec("loose", max_depth=4)
    chain = [DepthBound.of(a, 0), DepthBound.of(loose, 1)]
    assert rules.depth_limit(c, 2, chain) == 3
    assert rules.check(d, c, 2, chain).allowed
    assert rules.check(d, c, 3, [*chain, DepthBound.of(c, 2)]).reason == (
        "depth limit: a child of c would be at depth 4, the limit is 3"
        " (maxDepth 3 of a, at depth 0)"
    )


def test_a_depth_limit_names_the_highest_run_that_sets_it() -> None:
    """An ancestor and the parent bounding to the same depth: the refusal names the ancestor
    (root first, the first to set it); the parent names it when it alone is the tightest."""
    rules = SpawnRules(Limits(max_depth=5))
    a, c, d = spec("a", max_depth=2), spec("c", max_depth=0), spec("d")
    tie = rules.check(d, c, 2, [DepthBound.of(a, 0)])  # a: 0 + 2; c: 2 + 0
    assert tie.reason == (
        "depth limit: a child of c would be at depth 3, the limit is 2"
        " (maxDepth 2 of a, at depth 0)"
    )
    own = rules.check(d, c, 2, [DepthBound.of(spec("far", max_depth=4), 0)])
    assert own.reason == (
        "depth limit: a child of c would be at depth 3, the limit is 2"
        " (maxDepth 0 of c, at depth 2)"
    )
    assert rules.depth_limit(c, 2, [DepthBound.of(a, 0)]) == 2
