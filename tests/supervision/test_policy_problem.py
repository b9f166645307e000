"""``policy_problem``: the request's own policy settings, checked on the caller's thread of a
root spawn. Most requests set none of them and skip the checks; each setting given alone
must still be checked (a guard that forgot one would let it through to the handle)."""

from __future__ import annotations

from typing import Any

import pytest

from subagents.messages import SpawnRequest
from subagents.supervision.requests import policy_problem

BAD_ALONE: dict[str, tuple[Any, str]] = {
    "on_failure": ("shrug", "on_failure"),
    "max_retries": (-1, "max_retries must be an integer >= 0"),
    "token_budget": (0, "a token budget must be a positive integer"),
    "cost_budget_usd": (float("nan"), "a cost budget must be a positive, finite number"),
    "shared": ({"k": object()}, "shared context must be JSON data"),
}


def _request(**fields: Any) -> SpawnRequest:
    return SpawnRequest(request_id="r-1", agent="a", task="t", **fields)


def test_a_request_with_no_policy_setting_of_its_own_has_no_problem() -> None:
    assert policy_problem(_request()) is None
    assert policy_problem(_request(shared={})) is None


@pytest.mark.parametrize("field", sorted(BAD_ALONE))
def test_each_bad_setting_alone_is_named(field: str) -> None:
    value, words = BAD_ALONE[field]
    problem = policy_problem(_request(**{field: value}))
    assert problem is not None and words in problem, problem


@pytest.mark.parametrize("field", sorted(BAD_ALONE))
def test_each_good_setting_alone_has_no_problem(field: str) -> None:
    good = {
        "on_failure": "retry",
        "max_retries": 2,
        "token_budget": 100,
        "cost_budget_usd": 0.5,
        "shared": {"k": [1, 2]},
    }
    assert policy_problem(_request(**{field: good[field]})) is None


HUGE = 10**5000
"""An int past Python's digits limit (its repr raises) and past every float."""


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("max_retries", -HUGE, "max_retries must be an integer >= 0, got an int below -1e+308"),
        ("token_budget", -HUGE, "a token budget must be a positive integer, got an int below"),
        ("cost_budget_usd", HUGE, "a cost budget must be a positive, finite number of USD, got"),
    ],
    ids=["max_retries", "token_budget", "cost_budget_usd"],
)
def test_an_int_past_every_float_is_named_not_a_crash(field: str, value: int, words: str) -> None:
    """(The first two raised the digits limit's ValueError from the message's repr, the
    last an OverflowError from ``math.isfinite``: neither named the setting.)"""
    problem = policy_problem(_request(**{field: value}))
    assert problem is not None and words in problem, problem
