"""``request_problem``'s plain path: a request whose only text is an ASCII task within the cap
skips the per-text checks (``_plain_task``). Every request just outside that path is still
checked as before: the cap's edge, a non-ASCII task, a lone surrogate, the other texts.
Pure: no runtime, no thread."""

from __future__ import annotations

import pytest

from subagents.messages import SpawnRequest
from subagents.supervision.limits import Limits
from subagents.supervision.requests import request_problem

LIMITS = Limits(max_text_chars=10)


def _req(task: str, **fields: object) -> SpawnRequest:
    return SpawnRequest(request_id="q", agent="echo", task=task, **fields)  # type: ignore[arg-type]


def test_a_plain_task_at_the_cap_passes_and_one_more_character_is_refused() -> None:
    assert request_problem(_req("x" * 10), LIMITS) is None
    problem = request_problem(_req("x" * 11), LIMITS)
    assert problem is not None and problem.startswith(
        "the task is 11 characters, over the cap of 10"
    )


def test_a_task_off_the_plain_path_is_checked_as_before() -> None:
    assert request_problem(_req("é" * 10), LIMITS) is None  # not ASCII, encodable
    over = request_problem(_req("é" * 11), LIMITS)
    assert over is not None and "11 characters, over the cap of 10" in over
    surrogate = request_problem(_req("a\ud800"), LIMITS)
    assert surrogate is not None and surrogate.startswith("the task holds a lone surrogate")


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"context": "c\ud800"}, "the context holds a lone surrogate"),
        ({"context": "c" * 11}, "the context is 11 characters"),
        ({"label": "a\nb"}, "the label holds a control character"),
        ({"model": "m\ud800"}, "the model holds a lone surrogate"),
        ({"shared": {"k": "v\ud800"}}, "shared['k']"),
        ({"timeout": -1.0}, "timeout must be a positive number"),
        ({"timeout": 1e9}, "is above the maximum"),
        ({"timeout": 10**400}, "is above the maximum"),  # (math.isfinite raised on it)
        ({"timeout": -(10**400)}, "timeout must be a positive number"),
        ({"timeout": -(10**5000)}, "got an int below -1e+308"),  # (its repr raised)
    ],
)
def test_any_other_text_or_a_timeout_takes_a_plain_task_off_the_plain_path(
    fields: dict[str, object], named: str
) -> None:
    problem = request_problem(_req("plain", **fields), LIMITS)
    assert problem is not None and named in problem
