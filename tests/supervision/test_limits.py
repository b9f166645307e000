"""Limits: defaults, validation with errors naming the field and value, timeout resolution."""

from __future__ import annotations

import pytest

from subagents.supervision.limits import MAX_TIMEOUT_S, LimitError, Limits


def test_defaults_match_the_issue() -> None:
    limits = Limits()
    assert limits.max_depth == 3
    assert limits.max_concurrency == 10
    assert limits.per_agent == 5
    assert limits.max_children == 5
    assert limits.queue_bound == 20_000  # a 10,000-child gather on default limits fits
    assert limits.timeout_s == 300.0
    assert limits.max_timeout_s == MAX_TIMEOUT_S == 3600.0


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_concurrency", 0),
        ("per_agent", -1),
        ("max_children", 0),
        ("queue_bound", 0),
        ("max_turns", 0),
        ("max_concurrency", 2.5),
        ("max_concurrency", True),
        ("queue_bound", "10"),
    ],
)
def test_positive_integer_limits_refuse_bad_values(field: str, value: object) -> None:
    with pytest.raises(LimitError, match=rf"{field} must be a positive integer, got {value!r}"):
        Limits(**{field: value})  # type: ignore[arg-type]


def test_negative_depth_is_refused_and_zero_allowed() -> None:
    with pytest.raises(LimitError, match="max_depth must be >= 0 \\(a whole number\\), got -1"):
        Limits(max_depth=-1)
    with pytest.raises(LimitError, match="max_depth must be >= 0 \\(a whole number\\), got '3'"):
        Limits(max_depth="3")  # type: ignore[arg-type]
    assert Limits(max_depth=0).max_depth == 0


def test_per_tier_values_must_be_positive() -> None:
    with pytest.raises(LimitError, match=r"per_tier\[2\] must be a positive integer, got 0"):
        Limits(per_tier={1: 3, 2: 0})
    with pytest.raises(LimitError, match=r"per_tier\[1\] must be a positive integer, got '3'"):
        Limits(per_tier={1: "3"})  # type: ignore[dict-item]
    with pytest.raises(LimitError, match="per_tier: a tier must be an integer, got 'gold'"):
        Limits(per_tier={"gold": 2})  # type: ignore[dict-item]

    with pytest.raises(LimitError, match="per_tier must be a dict of tier: runs, got 3"):
        Limits(per_tier=3)  # type: ignore[arg-type]  # (was AttributeError: no .items())


HUGE = 10**5000
"""An int past Python's digits limit: its repr raises ``ValueError`` naming nothing."""


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        (
            {"max_concurrency": -HUGE},
            "max_concurrency must be a positive integer, got an int below",
        ),
        ({"max_depth": -HUGE}, "max_depth must be >= 0 \\(a whole number\\), got an int below"),
        ({"max_children": HUGE, "max_children_cap": 5}, "max_children \\(an int above 1e\\+308\\)"),
        ({"per_tier": {HUGE: -HUGE}}, "per_tier\\[an int above 1e\\+308\\] must be a positive"),
        ({"timeout_s": HUGE}, "timeout_s must be in \\(0, 3600\\], got an int above 1e\\+308"),
        ({"max_timeout_s": -HUGE}, "max_timeout_s must be in \\(0, 3600\\], got an int below"),
        ({"token_budget": -HUGE}, "token_budget must be a positive integer, got an int below"),
        ({"max_runs_per_tree": -HUGE}, "max_runs_per_tree must be a positive integer, got an int"),
    ],
)
def test_an_int_past_every_float_is_refused_naming_the_limit(
    fields: dict[str, object], named: str
) -> None:
    with pytest.raises(LimitError, match=named):
        Limits(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [0.0, -5.0, MAX_TIMEOUT_S + 1, "60", float("nan")])
def test_max_timeout_must_be_within_the_hard_maximum(value: object) -> None:
    with pytest.raises(LimitError, match="max_timeout_s must be in"):
        Limits(max_timeout_s=value)  # type: ignore[arg-type]


def test_timeout_cannot_exceed_max_timeout() -> None:
    with pytest.raises(LimitError, match=r"timeout_s must be in \(0, 60\], got 61"):
        Limits(timeout_s=61.0, max_timeout_s=60.0)
    with pytest.raises(LimitError, match=r"timeout_s must be in \(0, 60\], got '10'"):
        Limits(timeout_s="10", max_timeout_s=60.0)  # type: ignore[arg-type]


def test_token_budget_must_be_positive() -> None:
    with pytest.raises(LimitError, match="token_budget must be a positive integer, got 0"):
        Limits(token_budget=0)
    with pytest.raises(LimitError, match="token_budget must be a positive integer, got '5'"):
        Limits(token_budget="5")  # type: ignore[arg-type]


def test_timeout_for_takes_the_tightest_and_caps_it() -> None:
    limits = Limits(timeout_s=300.0, max_timeout_s=600.0)
    assert limits.timeout_for() == 300.0
    assert limits.timeout_for(None, None) == 300.0
    assert limits.timeout_for(20.0, None) == 20.0
    assert limits.timeout_for(50.0, 10.0) == 10.0
    assert limits.timeout_for(10_000.0) == 600.0


def test_a_definitions_max_children_replaces_the_default_up_to_the_cap() -> None:
    limits = Limits()
    assert limits.children_for(None) == 5  # no maxChildren: the default
    assert limits.children_for(6) == 6  # a team written for six gets six
    assert limits.children_for(2) == 2
    assert limits.children_for(500) == 50  # never past the cap
    assert Limits(max_children=3, max_children_cap=3).children_for(6) == 3


def test_max_children_above_its_cap_is_refused_by_name() -> None:
    with pytest.raises(LimitError, match=r"max_children \(9\) is above max_children_cap \(8\)"):
        Limits(max_children=9, max_children_cap=8)


def test_the_command_line_max_children_is_a_ceiling_for_definitions() -> None:
    import argparse

    from subagents.cli.runtime_args import add_runtime_arguments, limits_from

    parser = argparse.ArgumentParser()
    add_runtime_arguments(parser)
    limits = limits_from(parser.parse_args(["--max-children", "3", "--per-agent", "2"]))
    assert limits.children_for(6) == 3 and limits.children_for(None) == 3
    assert limits.per_agent == 2
    defaults = limits_from(parser.parse_args([]))
    assert defaults.children_for(6) == 6


def test_a_high_default_raises_the_unset_cap_with_it() -> None:
    assert Limits(max_children=80).children_for(70) == 70
    assert Limits(max_children=80).children_for(90) == 80
    with pytest.raises(LimitError, match="max_children_cap must be a positive integer, got 0"):
        Limits(max_children_cap=0)
