"""`extends`: deep merge, and broken chains dropped one definition at a time."""

from __future__ import annotations

from subagents.definitions import AgentSpec, resolve_extends


def a(name: str, **fields: object) -> AgentSpec:
    base: dict[str, object] = {"name": name, "description": f"{name} agent", "source": f"{name}.md"}
    base.update(fields)
    return AgentSpec(**base)  # type: ignore[arg-type]


def by_name(*specs: AgentSpec) -> dict[str, AgentSpec]:
    return {s.name: s for s in specs}


def test_child_wins_lists_replace_mappings_merge():
    base = a(
        "base",
        prompt="Base prompt.",
        tools=("Read", "Grep"),
        model="opus",
        skills=("pdf",),
        max_turns=5,
        capabilities={"review": 1, "nested": {"x": 1}},
        metadata={"team": "core", "deep": {"a": 1}},
        timeout=60.0,
    )
    child = a(
        "child",
        extends="base",
        tools=("Grep", "Bash"),
        model="haiku",
        skills=("xlsx",),
        capabilities={"test": 2, "nested": {"y": 2}},
        metadata={"deep": {"b": 2}},
    )
    resolved, issues = resolve_extends(by_name(base, child))
    assert issues == []
    merged = resolved["child"]
    assert merged.name == "child" and merged.description == "child agent"
    assert merged.source == "child.md" and merged.extends == "base"
    assert merged.prompt == "Base prompt."  # child has none: inherited
    assert merged.tools == ("Grep", "Bash")  # a child's list replaces: it can narrow
    assert merged.model == "haiku" and merged.skills == ("xlsx",)
    assert merged.max_turns == 5 and merged.timeout == 60.0
    assert merged.capabilities == {"review": 1, "nested": {"x": 1, "y": 2}, "test": 2}
    assert merged.metadata == {"team": "core", "deep": {"a": 1, "b": 2}}
    assert resolved["base"] == base


def test_chains_resolve_in_order():
    specs = by_name(
        a("c", extends="b", tools=("Write",)),
        a("b", extends="a", tools=("Grep",), prompt="B"),
        a("a", tools=("Read",), prompt="A", tier=1),
    )
    resolved, issues = resolve_extends(specs)
    assert issues == []
    assert resolved["c"].tools == ("Write",)
    assert resolved["c"].prompt == "B" and resolved["c"].tier == 1


def test_missing_parent_drops_only_that_definition_and_its_children():
    specs = by_name(a("ok"), a("orphan", extends="ghost"), a("grandchild", extends="orphan"))
    resolved, issues = resolve_extends(specs)
    assert list(resolved) == ["ok"]
    reasons = {i.name: (i.severity, i.reason, i.file) for i in issues}
    assert reasons["orphan"] == (
        "error",
        "extends: parent 'ghost' is not defined (neither a name nor a path relative to the"
        " agents folder)",
        "orphan.md",
    )
    assert "parent 'orphan' could not be loaded" in reasons["grandchild"][1]


def test_cycles_are_errors_for_their_members_only():
    specs = by_name(
        a("x", extends="y"),
        a("y", extends="z"),
        a("z", extends="x"),
        a("self", extends="self"),
        a("fan", extends="x"),
        a("fine"),
    )
    resolved, issues = resolve_extends(specs)
    assert list(resolved) == ["fine"]
    by = {i.name: i.reason for i in issues}
    assert by["x"] == by["y"] == by["z"] == "extends: cycle x -> y -> z -> x"
    assert by["self"] == "extends: cycle self -> self"
    assert by["fan"].startswith("extends: parent 'x' could not be loaded (extends: cycle")
    assert len(issues) == 5 and all(i.severity == "error" for i in issues)


def test_a_long_chain_does_not_recurse():
    specs = by_name(*(a(f"n{i}", extends=f"n{i + 1}") for i in range(3000)), a("n3000"))
    resolved, issues = resolve_extends(specs)
    assert issues == [] and len(resolved) == 3001


def test_plus_fields_add_to_what_is_inherited_and_a_plain_list_replaces_it():
    specs = by_name(
        a("base", tools=("Read", "Grep"), skills=("pdf",), disallowed_tools=("Bash",)),
        a("wider", extends="base", additions={"tools": ("Write", "Read")}),
        a("own", extends="base", tools=("Glob",), additions={"tools": ("Edit",)}),
        a("deeper", extends="wider", additions={"skills": ("xlsx",)}),
        a("alone", tools=("Read",), additions={"tools": ("Write",)}),
        a("everything", additions={"tools": ("Write",)}),
    )
    resolved, issues = resolve_extends(specs)
    assert issues == []
    assert resolved["wider"].tools == ("Read", "Grep", "Write")  # no duplicate Read
    assert resolved["wider"].disallowed_tools == ("Bash",) and resolved["wider"].additions == {}
    assert resolved["own"].tools == ("Glob", "Edit")
    assert resolved["deeper"].tools == ("Read", "Grep", "Write")
    assert resolved["deeper"].skills == ("pdf", "xlsx")
    assert resolved["alone"].tools == ("Read", "Write")
    assert resolved["everything"].tools is None  # every tool already


def test_extends_by_a_path_relative_to_the_agents_folder():
    coder = a("coder", source="/agents/core/coder.md", category="core", prompt="Code.")
    other = a("coder-b", source="/agents/other/coder.md", category="other")
    specs = by_name(
        coder,
        other,
        a("fast", extends="core/coder", model="haiku"),
        a("dotted", extends="./core/coder.md"),
        a("lost", extends="core/nothing"),
    )
    resolved, issues = resolve_extends(specs)
    assert resolved["fast"].prompt == "Code." and resolved["fast"].model == "haiku"
    assert resolved["dotted"].prompt == "Code."
    assert [(i.name, i.reason) for i in issues] == [
        (
            "lost",
            "extends: parent 'core/nothing' is not defined (neither a name nor a path relative"
            " to the agents folder)",
        )
    ]


def test_a_path_matching_two_files_is_an_error_naming_both():
    specs = by_name(
        a("one", source="/a/x/base.md", category="x"),
        a("two", source="/b/x/base.md", category="x"),
        a("child", extends="x/base"),
    )
    resolved, issues = resolve_extends(specs)
    assert "child" not in resolved
    assert [i.reason for i in issues] == [
        "extends: path 'x/base' matches several: /a/x/base.md, /b/x/base.md"
    ]


def test_a_base_is_a_parent_of_last_resort_and_is_not_returned():
    base = a("explore", prompt="Built-in.", tools=("Read",))
    kid = a("kid", extends="explore")
    resolved, issues = resolve_extends(by_name(kid), {"explore": base})
    assert issues == [] and sorted(resolved) == ["kid"]
    assert resolved["kid"].tools == ("Read",) and resolved["kid"].prompt == "Built-in."
    mine = a("explore", prompt="Mine.")  # a loaded definition of that name wins over the base
    resolved, _ = resolve_extends(by_name(kid, mine), {"explore": base})
    assert resolved["kid"].prompt == "Mine." and resolved["explore"] == mine
