"""Every synthesis strategy on agreement, ties, empty input, failed inputs and mixed types."""

from __future__ import annotations

from typing import Any

import pytest

from subagents.supervision.synthesis import (
    STRATEGIES,
    Item,
    SynthesisError,
    canonical,
    parse_value,
    synthesize,
)


def items(*values: Any, agents: tuple[str, ...] = ()) -> list[Item]:
    return [
        Item(source=f"r{i}", value=v, agent=agents[i] if agents else f"a{i}")
        for i, v in enumerate(values)
    ]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_empty_input_is_an_error_not_a_value(strategy: str) -> None:
    kwargs: dict[str, Any] = {"scorer": len} if strategy == "best_pick" else {}
    out = synthesize(strategy, [], **kwargs)
    assert out.value is None
    assert out.error == "no successful inputs to synthesize"
    assert not out.ok


@pytest.mark.parametrize("strategy", [s for s in STRATEGIES if s != "chain"])
def test_failed_inputs_are_named_and_not_used(strategy: str) -> None:
    given = [*items(3, 3), Item(source="bad", ok=False, error="timed out")]
    kwargs: dict[str, Any] = {"scorer": float} if strategy == "best_pick" else {}
    out = synthesize(strategy, given, **kwargs)
    assert out.failed == (("bad", "timed out"),)
    assert "bad" not in out.sources
    assert not out.ok


def test_unknown_strategy_names_the_known_ones() -> None:
    with pytest.raises(SynthesisError, match=r"unknown synthesis strategy 'average'.*merge"):
        synthesize("average", items(1))


def test_parse_value_reads_json_and_keeps_text() -> None:
    assert parse_value('{"a": [1]}') == {"a": [1]}
    assert parse_value(" 2.5 ") == 2.5
    assert parse_value("plain words") == "plain words"
    assert parse_value(None) is None
    assert canonical({"b": 1, "a": 2}) == canonical({"a": 2, "b": 1})
    assert canonical(1) != canonical("1") != canonical(True)


# ---- merge ------------------------------------------------------------------------------------


def test_merge_deep_merges_objects_and_concatenates_lists() -> None:
    out = synthesize(
        "merge",
        items({"a": {"x": 1}, "tags": ["p"]}, {"a": {"y": 2}, "tags": ["q"], "b": True}),
    )
    assert out.value == {"a": {"x": 1, "y": 2}, "tags": ["p", "q"], "b": True}
    assert out.conflicts == ()
    assert out.ok
    assert out.sources == ("r0", "r1")


def test_merge_reports_differing_scalars_and_keeps_the_first() -> None:
    out = synthesize("merge", items({"a": {"x": 1}}, {"a": {"x": 2}}, {"a": {"x": 1}}))
    assert out.value == {"a": {"x": 1}}
    assert [(c.path, c.values, c.sources) for c in out.conflicts] == [
        ("$.a.x", (1, 2), ("r0", "r1"))
    ]


def test_merge_of_mixed_types_is_a_conflict_naming_both_kinds() -> None:
    out = synthesize("merge", items({"k": [1]}, {"k": "one"}, [1, 2]))
    reasons = [(c.path, c.reason) for c in out.conflicts]
    assert ("$.k", "cannot merge list with string") in reasons
    assert ("$", "cannot merge object with list") in reasons
    assert out.value == {"k": [1]}


def test_merge_of_lists_at_top_level_concatenates() -> None:
    assert synthesize("merge", items([1], [2, 3], [])).value == [1, 2, 3]


# ---- vote -------------------------------------------------------------------------------------


def test_vote_most_common_wins_and_dissent_is_reported() -> None:
    out = synthesize("vote", items("yes", "no", "yes"))
    assert out.value == "yes"
    assert out.sources == ("r0", "r2")
    assert len(out.conflicts) == 1
    assert out.conflicts[0].values == ("no",)
    assert out.conflicts[0].sources == ("r1",)


def test_vote_tie_is_reported_and_first_seen_wins() -> None:
    out = synthesize("vote", items("b", "a", "a", "b"))
    assert out.value == "b"
    assert out.conflicts[0].reason.startswith("tie: 2 values")
    assert set(out.conflicts[0].values) == {"a", "b"}


def test_vote_compares_objects_by_content_and_keeps_types_apart() -> None:
    out = synthesize("vote", items({"a": 1, "b": 2}, {"b": 2, "a": 1}, 1, "1", True))
    assert out.value == {"a": 1, "b": 2}
    assert out.sources == ("r0", "r1")
    assert set(map(canonical, out.conflicts[0].values)) == {"1", '"1"', "true"}


def test_unanimous_vote_is_ok() -> None:
    out = synthesize("vote", items(7, 7))
    assert out.ok and out.value == 7


# ---- consensus --------------------------------------------------------------------------------


def test_consensus_keeps_fields_agreed_by_a_majority() -> None:
    out = synthesize(
        "consensus",
        items(
            {"lang": "py", "tests": True, "owner": "ann"},
            {"lang": "py", "tests": True, "owner": "bob"},
            {"lang": "go", "tests": True},
        ),
    )
    assert out.value == {"lang": "py", "tests": True}
    by_path = {c.path: c for c in out.conflicts}
    assert by_path["$.lang"].values == ("go",)  # dissent is reported
    assert by_path["$.owner"].reason.startswith("no agreement: best 1/3")
    assert set(by_path["$.owner"].values) == {"ann", "bob"}


def test_consensus_threshold_is_strict() -> None:
    two_of_three = items({"x": 1}, {"x": 1}, {"x": 2})
    assert synthesize("consensus", two_of_three, threshold=0.6).value == {"x": 1}
    assert synthesize("consensus", two_of_three, threshold=0.7).value == {}
    with pytest.raises(SynthesisError, match="threshold"):
        synthesize("consensus", two_of_three, threshold=1.0)


def test_consensus_tie_has_no_winner() -> None:
    out = synthesize("consensus", items("a", "b"), threshold=0.0)
    assert out.value is None
    assert out.error == "no agreement above the threshold"
    assert out.conflicts[0].path == "$"


def test_consensus_on_mixed_types_compares_whole_values() -> None:
    out = synthesize("consensus", items({"a": 1}, "x", {"a": 1}))
    assert out.value == {"a": 1}
    assert out.conflicts[0].values == ("x",)


# ---- best_pick --------------------------------------------------------------------------------


def test_best_pick_takes_the_highest_score() -> None:
    out = synthesize("best_pick", items("short", "the longest", "mid one"), scorer=len)
    assert out.value == "the longest"
    assert out.sources == ("r1",)
    assert out.ok


def test_best_pick_tie_and_scorer_errors_are_conflicts() -> None:
    out = synthesize("best_pick", items("ab", "cd", 5), scorer=len)
    reasons = [c.reason for c in out.conflicts]
    assert any(r.startswith("scorer failed: TypeError") for r in reasons)
    assert "tie: 2 values score 2" in reasons
    assert out.value == "ab"


def test_best_pick_needs_a_scorer_and_reports_total_failure() -> None:
    with pytest.raises(SynthesisError, match="needs a scorer"):
        synthesize("best_pick", items(1))
    out = synthesize("best_pick", items(None, None), scorer=float)
    assert out.error == "the scorer failed on every input"
    assert len(out.conflicts) == 2


# ---- weighted_average -------------------------------------------------------------------------


def test_weighted_average_by_agent_weight() -> None:
    given = items(1.0, 4, agents=("cheap", "expert"))
    assert synthesize("weighted_average", given).value == 2.5
    weighted = synthesize("weighted_average", given, weights={"expert": 3.0})
    assert weighted.value == pytest.approx((1.0 + 12.0) / 4.0)


def test_weighted_average_leaves_out_non_numbers_and_says_so() -> None:
    out = synthesize("weighted_average", items(2, "three", True, None, 4))
    assert out.value == 3.0
    assert out.sources == ("r0", "r4")
    assert [c.sources[0] for c in out.conflicts] == ["r1", "r2", "r3"]
    assert "not a number (boolean)" in out.conflicts[1].reason


def test_weighted_average_zero_weights_and_no_numbers_are_errors() -> None:
    out = synthesize("weighted_average", items(1, 2), weights={"a0": 0, "a1": 0})
    assert out.error == "the weights of the numeric inputs add up to 0"
    assert synthesize("weighted_average", items("x")).error == "no numeric inputs to average"
    with pytest.raises(SynthesisError, match="negative"):
        synthesize("weighted_average", items(1), weights={"a0": -1})


# ---- chain ------------------------------------------------------------------------------------


def test_chain_last_wins() -> None:
    out = synthesize("chain", items("draft", {"edited": True}, 3))
    assert out.value == 3
    assert out.sources == ("r0", "r1", "r2")


def test_chain_stops_at_a_failed_link() -> None:
    given = [*items("a"), Item(source="r1", agent="editor", ok=False, error="crash: boom")]
    out = synthesize("chain", given)
    assert out.value is None
    assert out.error == "link 1 (editor) failed: crash: boom"
    assert out.sources == ("r0",)
    assert out.failed == (("r1", "crash: boom"),)
