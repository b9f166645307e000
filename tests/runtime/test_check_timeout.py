"""``check_timeout``'s plain path (a positive finite int or float, every ``run(wait=)`` and
``result(timeout=)`` that gives one) answers as the checked path does: seconds as a float.
Everything else takes the checked path: zero and below are 0.0, infinity stays, NaN and a
bool are refused. Pure: no runtime."""

from __future__ import annotations

import math

import pytest

from subagents.runtime._run_handle import check_timeout


@pytest.mark.parametrize(
    ("given", "seconds"),
    [(30, 30.0), (2.5, 2.5), (1e308, 1e308), (2**80, float(2**80)), (0, 0.0), (-1, 0.0),
     (-0.0, 0.0), (math.inf, math.inf), (None, None)],
)  # fmt: skip
def test_a_number_of_seconds_is_a_float_and_none_waits_without_limit(
    given: float | None, seconds: float | None
) -> None:
    got = check_timeout(given, "wait")
    assert got == seconds
    assert got is None or type(got) is float


@pytest.mark.parametrize(
    ("given", "seconds"), [(10**400, math.inf), (-(10**400), 0.0)], ids=["above", "below"]
)
def test_an_int_too_large_for_a_float_is_no_limit_or_none(given: int, seconds: float) -> None:
    """An int past the largest float (``float()`` of it raises ``OverflowError``, on the
    plain path and the checked one alike, naming nothing) is a wait without limit (as
    infinity is), or, below zero, a look without waiting."""
    assert check_timeout(given, "wait") == seconds


@pytest.mark.parametrize("given", [math.nan, True, False, "3"])
def test_nan_a_bool_or_text_is_refused_naming_the_argument(given: object) -> None:
    with pytest.raises((TypeError, ValueError), match=r"^wait must be a number of seconds"):
        check_timeout(given, "wait")  # type: ignore[arg-type]
