"""The Catalog without threads: lookup, matching, groups, teams, spawn rules, changes."""

from __future__ import annotations

import pytest

from subagents.definitions.catalog import (
    Catalog,
    Changes,
    Requirements,
    UnknownAgentError,
    UnknownGroupError,
    priority_rank,
)
from subagents.definitions.errors import DefinitionError
from subagents.definitions.spec import AgentSpec, Level


def spec(name: str, description: str = "does things", **kw: object) -> AgentSpec:
    return AgentSpec(name=name, description=description, prompt=f"You are {name}.", **kw)  # type: ignore[arg-type]


@pytest.fixture
def catalog() -> Catalog:
    return Catalog.from_specs(
        [
            spec(
                "code-reviewer",
                "Reviews pull requests for bugs and style",
                type="reviewer",
                tier=2,
                capabilities=("review", "python"),
                category="quality",
            ),
            spec(
                "security-auditor",
                "Audits code for security vulnerabilities",
                type="reviewer",
                tier=1,
                capabilities={"security": "high", "review": "medium"},
                category="quality/security",
                priority="high",
            ),
            spec(
                "python-pro",
                "Writes idiomatic Python code",
                type="developer",
                tier=2,
                capabilities=("python",),
                category="languages",
            ),
            spec(
                "lead",
                "Coordinates a team of reviewers",
                type="manager",
                tier=0,
                key_sub_agents=("code-reviewer", "security-auditor", "ghost"),
                metadata={"allowedChildTypes": ["reviewer"]},
            ),
            spec("explore", "Read-only investigation", tools=("Read", "Grep")),
        ]
    )


def test_lookup(catalog: Catalog) -> None:
    assert catalog.names() == ("code-reviewer", "explore", "lead", "python-pro", "security-auditor")
    assert [s.name for s in catalog.list()] == list(catalog.names())
    assert catalog.get("python-pro").type == "developer"
    assert catalog.has("lead") and "lead" in catalog and len(catalog) == 5
    assert not catalog.has("nobody")


def test_unknown_name_lists_close_matches(catalog: Catalog) -> None:
    with pytest.raises(UnknownAgentError) as err:
        catalog.get("code-reviewr")
    assert err.value.suggestions[0] == "code-reviewer"
    assert "unknown agent 'code-reviewr'; did you mean: code-reviewer" in str(err.value)
    with pytest.raises(UnknownAgentError, match="known: code-reviewer, explore"):
        catalog.get("zzzzzzzz")
    with pytest.raises(UnknownAgentError, match="no agents are defined"):
        Catalog().get("x")
    assert isinstance(err.value, LookupError)


def test_queries(catalog: Catalog) -> None:
    assert [s.name for s in catalog.by_type("Reviewer")] == ["code-reviewer", "security-auditor"]
    assert [s.name for s in catalog.by_tier(2)] == ["code-reviewer", "python-pro"]
    assert [s.name for s in catalog.by_capability("python")] == ["code-reviewer", "python-pro"]
    # capabilities given as a mapping count by their keys
    assert [s.name for s in catalog.by_capability("security")] == ["security-auditor"]
    assert [s.name for s in catalog.by_category("quality")] == ["code-reviewer", "security-auditor"]
    assert [s.name for s in catalog.by_category("quality/security")] == ["security-auditor"]
    assert catalog.by_category("qual") == ()
    assert catalog.by_type("nothing") == ()


def test_results_are_immutable(catalog: Catalog) -> None:
    listed = catalog.list()
    assert isinstance(listed, tuple)
    with pytest.raises(AttributeError):
        listed[0].name = "changed"  # type: ignore[misc]
    # a caller cannot change the catalog through what it was given
    names = catalog.names()
    assert isinstance(names, tuple)
    stats = catalog.stats()
    stats.by_level.clear()
    assert catalog.stats().by_level == {"code": 5}


def test_rank_scoring_and_reasons(catalog: Catalog) -> None:
    ranked = catalog.rank(Requirements(type="reviewer", capabilities=("security",)))
    assert [r.spec.name for r in ranked] == ["security-auditor", "code-reviewer"]
    assert ranked[0].score == 8 + 3 and ranked[1].score == 8
    assert ranked[0].reasons == ("type reviewer", "capabilities security")

    # tier distance: same tier +2, one off +1
    ranked = catalog.rank(Requirements(tier=2))
    scores = {r.spec.name: r.score for r in ranked}
    assert scores == {"code-reviewer": 2, "python-pro": 2, "security-auditor": 1}
    # three off is negative, so on its own "lead" (tier 0) is no match for tier 3
    assert "lead" not in {r.spec.name for r in catalog.rank(Requirements(tier=3))}


def test_text_keywords_match_name_and_description(catalog: Catalog) -> None:
    ranked = catalog.rank(Requirements(text="please review my python code for bugs"))
    best = ranked[0]
    assert best.spec.name == "code-reviewer"
    # "code" and "review" (a stem of "reviewer") in the name (+2 each), "bugs" in the
    # description (+1); "python" only in capabilities, which text does not search
    assert best.reasons == ("name matches code, review", "description matches bugs")
    assert best.score == 5
    assert catalog.find_best_match(Requirements(text="idiomatic python")) == catalog.get(
        "python-pro"
    )


def test_keywords_match_on_shared_stems_both_ways() -> None:
    c = Catalog.from_specs(
        [spec("test-runner", "Runs the suite"), spec("reviews", "Looks at changes")]
    )
    # "testing" shares the stem "test" with the name; "review" is a stem of "reviews"
    assert c.find_best_match(Requirements(text="testing")) == c.get("test-runner")
    assert c.find_best_match(Requirements(text="review")) == c.get("reviews")
    assert c.find_best_match(Requirements(text="tes")) is None  # stems are 4+ letters
    assert c.find_best_match(Requirements(text="change")) == c.get("reviews")


def test_priority_breaks_ties(catalog: Catalog) -> None:
    # both reviewers score 8 on type alone; the high-priority one wins
    ranked = catalog.rank(Requirements(type="reviewer"))
    assert ranked[0].score == ranked[1].score
    assert ranked[0].spec.name == "security-auditor"
    assert priority_rank("critical") > priority_rank("high") > priority_rank("low") > 0
    assert priority_rank(7) == 7 and priority_rank("5") == 5 and priority_rank(None) == 0


def test_find_best_match_none_when_nothing_fits(catalog: Catalog) -> None:
    assert catalog.find_best_match(Requirements()) is None
    assert catalog.find_best_match(Requirements(type="astronaut", text="zebra xylophone")) is None
    assert catalog.find_best_match(Requirements(category="languages")) == catalog.get("python-pro")
    assert len(catalog.rank(Requirements(type="reviewer"), limit=1)) == 1


def test_groups(catalog: Catalog) -> None:
    group = catalog.define_group(
        "reviewers", ["code-reviewer", "security-auditor", "code-reviewer"]
    )
    assert [s.name for s in group.members] == ["code-reviewer", "security-auditor"]
    assert catalog.group("reviewers") == group and catalog.groups() == ("reviewers",)
    with pytest.raises(UnknownAgentError, match="did you mean: python-pro"):
        catalog.define_group("bad", ["python-pr"])
    assert catalog.groups() == ("reviewers",)  # the bad group was not half-defined
    with pytest.raises(UnknownGroupError, match="unknown group 'reviewer'; did you mean"):
        catalog.group("reviewer")
    with pytest.raises(ValueError, match="must not be empty"):
        catalog.define_group(" ", ["lead"])
    # a member that goes away is reported, not silently dropped
    own = Catalog.from_specs([spec("a"), spec("b")])
    own.define_group("g", ["a", "b"])
    assert own.unregister("b")
    assert own.group("g").missing == ("b",)
    assert own.remove_group("g") and not own.remove_group("g")


def test_team_of_a_manager(catalog: Catalog) -> None:
    team = catalog.team("lead")
    assert team.manager.name == "lead"
    assert [s.name for s in team.members] == ["code-reviewer", "security-auditor"]
    assert team.missing == ("ghost",)
    assert catalog.team("python-pro").members == ()
    with pytest.raises(UnknownAgentError):
        catalog.team("boss")


def test_type_restrictions(catalog: Catalog) -> None:
    assert catalog.check_type_restriction("lead", "code-reviewer") is None
    reason = catalog.check_type_restriction("lead", "python-pro")
    assert reason == (
        "spawn rule: lead may only spawn agents of type reviewer (allowedChildTypes);"
        " python-pro is of type 'developer'"
    )
    reason = catalog.check_type_restriction("lead", "explore")
    assert reason is not None and "explore has no type" in reason
    # tools given without a spawn tool: may not spawn anything
    reason = catalog.check_type_restriction("explore", "python-pro")
    assert reason == (
        "spawn rule: explore may not spawn subagents: its tools (Read, Grep) name none of"
        " spawn_subagent, Agent, Agent(<name>), Task"
    )
    # tools absent = every tool, no allowedChildTypes = any type
    assert catalog.check_type_restriction("python-pro", "explore") is None
    assert catalog.check_type_restriction("python-pro", "python-pro") == (
        "spawn rule: python-pro may not spawn itself (a definition opts in with"
        " allowSelfSpawn: true)"
    )
    reason = catalog.check_type_restriction("python-pro", "nobody")
    assert reason is not None and reason.startswith("unknown agent 'nobody'")


def test_type_restriction_variants() -> None:
    c = Catalog.from_specs(
        [
            spec("boss", tools=("Read", "spawn_subagent"), metadata={"allowed_child_types": "*"}),
            spec("picky", metadata={"allowedChildTypes": "Developer, tester"}),
            spec("denied", disallowed_tools=("spawn_subagent",)),
            spec("dev", type="developer"),
            spec("qa", type="tester"),
            spec("ops", type="operator"),
        ]
    )
    assert c.check_type_restriction("boss", "ops") is None
    assert c.check_type_restriction("picky", "dev") is None
    assert c.check_type_restriction("picky", "qa") is None
    assert c.check_type_restriction("picky", "ops") is not None
    reason = c.check_type_restriction("denied", "dev")
    assert reason == (
        "spawn rule: denied may not spawn subagents: its disallowedTools list spawn_subagent"
    )


def test_claude_code_agent_and_task_forms_in_tools() -> None:
    c = Catalog.from_specs(
        [
            spec("boss", tools=("Read", "Agent(reviewer, tester)")),
            spec("tasker", tools=("Task",)),
            spec("old", tools=("Task(reviewer)", "Task(Tester)")),
            spec("almost", tools=("Agent", "Read"), disallowed_tools=("Agent(tester)",)),
            spec("off", disallowed_tools=("Task",)),
            spec("reviewer"),
            spec("tester"),
            spec("developer"),
        ]
    )
    assert c.check_type_restriction("boss", "reviewer") is None
    assert c.check_type_restriction("boss", "tester") is None
    assert c.check_type_restriction("boss", "developer") == (
        "spawn rule: boss may only spawn reviewer, tester (tools: Agent(reviewer, tester));"
        " not developer"
    )
    assert c.check_type_restriction("tasker", "developer") is None  # bare Task: any agent
    assert c.check_type_restriction("old", "tester") is None  # names compare case-insensitively
    assert c.check_type_restriction("old", "developer") is not None
    assert c.check_type_restriction("almost", "reviewer") is None
    assert c.check_type_restriction("almost", "tester") == (
        "spawn rule: almost may not spawn tester (disallowedTools)"
    )
    assert c.check_type_restriction("off", "reviewer") == (
        "spawn rule: off may not spawn subagents: its disallowedTools list Task"
    )


def test_self_spawn_only_when_the_definition_opts_in() -> None:
    c = Catalog.from_specs(
        [
            spec("fib", metadata={"allowSelfSpawn": True}),
            spec("fib2", metadata={"allow_self_spawn": "yes"}),
            spec("named", tools=("Agent(named)",)),  # naming itself in Agent(...) opts in
            spec("plain"),
            spec("bad", metadata={"allowSelfSpawn": "maybe"}),
        ]
    )
    assert c.check_type_restriction("fib", "fib") is None
    assert c.check_type_restriction("fib2", "fib2") is None
    assert c.check_type_restriction("named", "named") is None
    assert c.check_type_restriction("plain", "plain") is not None
    assert c.check_type_restriction("bad", "plain") == (
        "spawn rule: bad: allowSelfSpawn must be true or false, got 'maybe'"
    )


def test_allowed_child_types_match_a_type_or_a_name_and_empty_allows_none() -> None:
    c = Catalog.from_specs(
        [
            spec("boss", metadata={"allowedChildTypes": ["reviewer"]}),
            spec("none", metadata={"allowedChildTypes": []}),
            spec("reviewer"),  # no type, but its name is listed
            spec("developer", type="developer"),
            spec("auditor", type="Reviewer"),
        ]
    )
    assert c.check_type_restriction("boss", "reviewer") is None
    assert c.check_type_restriction("boss", "auditor") is None
    assert c.check_type_restriction("boss", "developer") is not None
    reason = c.check_type_restriction("none", "reviewer")
    assert reason is not None and "none (an empty list)" in reason


def test_register_unregister_and_subscribers() -> None:
    c = Catalog.from_specs([spec("base", level=Level.BUILTIN)])
    seen: list[Changes] = []
    unsubscribe = c.subscribe(seen.append)
    assert c.register(spec("extra")) == Changes(added=("extra",))
    # registering over a built-in shadows it; the registered one is level CODE
    over = spec("base", "replaced", level=Level.USER)
    assert c.register(over) == Changes(changed=("base",))
    assert c.get("base").description == "replaced" and c.get("base").level == Level.CODE
    assert c.stats().shadowed == 1
    # unregistering reveals the built-in again
    assert c.unregister("base")
    assert c.get("base").level == Level.BUILTIN
    assert not c.unregister("base")  # the built-in was never registered in code
    assert not c.unregister("missing")
    assert seen == [
        Changes(added=("extra",)),
        Changes(changed=("base",)),
        Changes(changed=("base",)),
    ]
    unsubscribe()
    c.register(spec("later"))
    assert len(seen) == 3 and c.subscriber_count == 0


def test_a_raising_subscriber_does_not_stop_the_others() -> None:
    c = Catalog()
    got: list[Changes] = []

    def broken(_: Changes) -> None:
        raise RuntimeError("subscriber bug")

    c.subscribe(broken)
    c.subscribe(got.append)
    c.register(spec("x"))
    assert got == [Changes(added=("x",))]
    assert c.get("x").name == "x"


def test_register_refuses_an_invalid_spec_and_changes_nothing() -> None:
    c = Catalog.from_specs([spec("fine")])
    with pytest.raises(DefinitionError, match=r"'bad\\\\name' contains a backslash"):
        c.register(spec("bad\\name"))
    with pytest.raises(DefinitionError, match="invalid: maxDepth must be a positive whole number"):
        c.register(spec("deep", max_depth=-1))
    assert c.names() == ("fine",)
    # tool warnings do not block (strict mode is the loader's choice)
    c.register(spec("odd", tools=("Teleport",)))
    assert c.has("odd")


def test_stats_counts() -> None:
    c = Catalog.from_specs(
        [
            spec("a", category="x", type="t"),
            spec("b", category="x", level=Level.BUILTIN),
            spec("c", category="y/z", type="t", level=Level.USER),
        ]
    )
    s = c.stats()
    assert s.total == 3
    assert s.by_level == {"code": 1, "builtin": 1, "user": 1}
    assert s.by_category == {"x": 2, "y/z": 1}
    assert s.by_type == {"t": 2}
    assert s.shadowed == 0 and s.issues == 0


def test_reload_without_loader_is_a_no_op() -> None:
    c = Catalog.from_specs([spec("a")])
    assert c.reload() == Changes()
    assert not Changes() and Changes(removed=("a",))
