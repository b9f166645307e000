"""What travels by value to a cluster's nodes: the program's own modules, not installed ones.

Why: a node unpickles the kit (the tools, the function agents, the model) in its own
process; an object whose module it cannot import (a test's helper, a script's sibling file)
must travel by value, or the node fails with ``No module named ...`` (seen: a tool defined in
a test module, a helper of a test package's ``conftest``)."""

from __future__ import annotations

import msgspec
import pytest

import gates
import subagents.runtime
from subagents.cluster.kit import user_modules


def test_the_programs_own_modules_go_by_value_and_installed_ones_do_not() -> None:
    found = {module.__name__ for module in user_modules()}
    assert __name__ in found  # this test module: loaded from the source tree, not installed
    assert gates.__name__ in found  # a helper beside the tests, imported by name
    for installed in (msgspec.__name__, pytest.__name__, "json", subagents.runtime.__name__):
        assert installed not in found, installed
    assert all(not m.__name__.startswith("subagents.") for m in user_modules())


def test_a_kit_takes_newer_definitions_only() -> None:
    """Pushes may cross (a re-set-up host gets the current version, then a late push): a
    node keeps the newest definitions it was given, whatever order they come in."""
    from subagents.cluster.kit import NodeKit
    from subagents.definitions.spec import AgentSpec
    from subagents.runtime import Runtime
    from subagents.runtime._assembly import behaviours

    first = AgentSpec(name="first", description="at start")
    with Runtime([first]) as rt:
        kit = NodeKit({}, rt.env, rt.env.agents(), behaviours)
    second = [first, AgentSpec(name="second", description="after a reload")]
    third = [AgentSpec(name="third", description="after another")]
    assert kit.version == 0 and [s.name for s in kit.env.agents()] == ["first"]
    assert kit.definitions(2, third)
    assert not kit.definitions(1, second)  # older: came late
    assert not kit.definitions(2, second)  # the same version again
    assert kit.version == 2 and [s.name for s in kit.env.agents()] == ["third"]
