"""RunTree: parent links, ancestors, deepest-first walks, root scoping and forgetting."""

from __future__ import annotations

from subagents.supervision.tree import RunTree


def build() -> RunTree:
    #   root -> a -> a1 -> a1x
    #        -> b -> b1
    #   other
    tree = RunTree()
    tree.add("root", None)
    tree.add("a", "root")
    tree.add("b", "root")
    tree.add("a1", "a")
    tree.add("b1", "b")
    tree.add("a1x", "a1")
    tree.add("other", None)
    return tree


def test_parent_children_root() -> None:
    tree = build()
    assert tree.parent("a1") == "a"
    assert tree.parent("root") is None
    assert tree.children("root") == ["a", "b"]
    assert tree.root("a1x") == "root"
    assert tree.root("other") == "other"
    assert "a1x" in tree
    assert "nope" not in tree


def test_ancestors_parent_first_root_last() -> None:
    tree = build()
    assert tree.ancestors("a1x") == ["a1", "a", "root"]
    assert tree.ancestors("root") == []


def test_is_descendant_excludes_self_and_other_branches() -> None:
    tree = build()
    assert tree.is_descendant("a1x", "root")
    assert tree.is_descendant("a1x", "a")
    assert not tree.is_descendant("a", "a")
    assert not tree.is_descendant("b1", "a")
    assert not tree.is_descendant("root", "a1x")
    assert not tree.is_descendant("a", "other")


def test_deepest_first_puts_every_run_before_its_parent() -> None:
    tree = build()
    order = tree.deepest_first("root")
    assert sorted(order) == sorted(["root", "a", "b", "a1", "b1", "a1x"])
    position = {run: i for i, run in enumerate(order)}
    for run in order:
        parent = tree.parent(run)
        if parent is not None:
            assert position[run] < position[parent], (run, parent, order)
    assert order[0] == "a1x"
    assert order[-1] == "root"
    assert tree.deepest_first("b") == ["b1", "b"]


def test_in_root_stays_in_its_tree() -> None:
    tree = build()
    assert set(tree.in_root("root")) == {"root", "a", "b", "a1", "b1", "a1x"}
    assert list(tree.in_root("other")) == ["other"]


def test_forget_drops_a_subtree_and_unlinks_it_from_its_parent() -> None:
    tree = build()
    tree.forget(tree.subtree("a"))
    for gone in ("a", "a1", "a1x"):
        assert gone not in tree
    assert tree.children("root") == ["b"]
    assert tree.subtree("root") == ["root", "b", "b1"]
    tree.forget(["never-added"])  # forgetting an unknown id is harmless
    assert tree.subtree("root") == ["root", "b", "b1"]
