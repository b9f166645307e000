"""Placement: the parent's node first, spill to the least loaded, resources select nodes."""

from __future__ import annotations

import pytest

from subagents.cluster.placement import Placement, PlacementError, resource_needs


def two_nodes(slots: int = 2) -> Placement:
    p = Placement()
    p.add("a", slots)
    p.add("b", slots, {"gpu": 1})
    return p


def test_a_child_goes_on_its_parents_node_while_it_has_room() -> None:
    p = two_nodes()
    p.started("b")
    assert p.place("b") == "b"  # b has 1 free slot, a has 2: the parent's node still wins
    p.started("b")
    assert p.place("b") == "a"  # b is full: spill


def test_a_root_run_goes_to_the_node_with_most_free_slots_then_fewest_runs_then_first() -> None:
    p = Placement()
    p.add("a", 4)
    p.add("b", 8)
    assert p.place() == "b"  # 8 free against 4
    for _ in range(4):
        p.started("b")
    assert p.place() == "a"  # 4 free each: fewer running
    p2 = Placement()
    p2.add("x", 3)
    p2.add("y", 3)
    assert p2.place() == "x"  # all equal: the first to join


def test_when_every_node_is_full_the_least_loaded_share_takes_it() -> None:
    p = Placement()
    p.add("small", 1)
    p.add("big", 4)
    p.started("small")
    for _ in range(4):
        p.started("big")
    assert p.place("big") == "small"  # both at 1.0 of their slots: the one running fewer
    p.started("small")
    assert p.place("small") == "big"  # 2/1 against 4/4


def test_needs_select_only_the_nodes_that_offer_them() -> None:
    p = two_nodes()
    assert p.place("a", {"gpu": 1}) == "b"
    with pytest.raises(PlacementError, match=r"no node offers gpu=2 \(nodes: a: no custom"):
        p.place("a", {"gpu": 2})
    p.started("b")
    p.started("b")
    assert p.place("a", {"gpu": 1}) == "b"  # full, but the only candidate


def test_a_removed_node_gets_nothing_and_an_empty_cluster_is_an_error() -> None:
    p = two_nodes()
    p.remove("a")
    assert p.place("a") == "b"
    p.remove("b")
    with pytest.raises(PlacementError, match="no node hosts runs"):
        p.place()


def test_ended_frees_a_slot_and_a_rejoin_starts_from_zero() -> None:
    p = two_nodes(slots=1)
    p.started("a")
    assert p.place("a") == "b"
    p.ended("a")
    assert p.place("a") == "a"
    p.started("a")
    p.add("a", 1)  # restarted host: what it ran is gone
    load = p.load("a")
    assert load is not None and load.running == 0
    p.ended("zzz")  # an unknown node is ignored
    p.ended("a")
    assert p.load("a") is not None and p.load("a").running == 0  # type: ignore[union-attr]


def test_bad_nodes_are_refused_by_name() -> None:
    p = Placement()
    with pytest.raises(ValueError, match="node 'a': slots must be at least 1, got 0"):
        p.add("a", 0)
    with pytest.raises(ValueError, match="node 'a': resource amounts must be positive"):
        p.add("a", 1, {"gpu": 0})


def test_resource_needs_from_a_definition_field() -> None:
    assert resource_needs(None, agent="x") == {}
    assert resource_needs({"gpu": 1, "big-mem": 0.5}, agent="x") == {"gpu": 1.0, "big-mem": 0.5}
    with pytest.raises(ValueError, match="agent 'x': resources must be a mapping"):
        resource_needs(["gpu"], agent="x")
    with pytest.raises(ValueError, match="'gpu' must be a positive number, got -1"):
        resource_needs({"gpu": -1}, agent="x")
    with pytest.raises(ValueError, match="'gpu' must be a positive number, got True"):
        resource_needs({"gpu": True}, agent="x")
    with pytest.raises(ValueError, match="a name must be a non-empty string"):
        resource_needs({" ": 1}, agent="x")
