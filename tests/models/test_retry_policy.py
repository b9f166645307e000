"""call_with_retries: attempts, deadline, retry-after, cancellation, errors passed through."""

from __future__ import annotations

import threading
import time

import pytest

from recorded_waits import RecordedWaits
from subagents.models import ModelError
from subagents.models.retry import RetryPolicy, TransientError, call_with_retries

FAST = RetryPolicy(max_attempts=4, base_wait=0.001, max_wait=0.002)


class Flaky:
    """Fails ``failures`` times with ``error``, then returns "ok"; records timeouts and times."""

    def __init__(self, failures: int, error: ModelError) -> None:
        self.failures = failures
        self.error = error
        self.timeouts: list[float | None] = []
        self.times: list[float] = []

    def __call__(self, timeout: float | None) -> str:
        self.timeouts.append(timeout)
        self.times.append(time.monotonic())
        if len(self.timeouts) <= self.failures:
            raise self.error
        return "ok"


def test_succeeds_after_transient_failures() -> None:
    flaky = Flaky(3, TransientError("server", "boom"))
    assert call_with_retries(flaky, policy=FAST) == "ok"
    assert len(flaky.timeouts) == 4
    assert flaky.timeouts == [None] * 4


def test_gives_up_after_max_attempts_with_last_error() -> None:
    flaky = Flaky(10, TransientError("overloaded", "busy"))
    with pytest.raises(ModelError) as info:
        call_with_retries(flaky, policy=FAST)
    assert len(flaky.timeouts) == 4
    assert info.value.kind == "overloaded"
    assert info.value.transient is True
    assert "gave up after 4 attempt(s)" in info.value.message
    assert not isinstance(info.value, TransientError)


def test_final_errors_are_not_retried() -> None:
    flaky = Flaky(10, ModelError("auth", "bad key"))
    with pytest.raises(ModelError) as info:
        call_with_retries(flaky, policy=FAST)
    assert len(flaky.timeouts) == 1
    assert info.value.kind == "auth"
    assert info.value.message == "bad key"


def test_timeout_is_time_left_to_deadline() -> None:
    flaky = Flaky(1, TransientError("server", "x"))
    deadline = time.monotonic() + 5
    call_with_retries(flaky, policy=FAST, deadline=deadline)
    first, second = flaky.timeouts
    assert first is not None and second is not None
    # each attempt gets what was left when it was made (taken before the attempt saw the
    # clock): bounded by the clock, not by how fast a loaded machine got there
    assert deadline - flaky.times[0] <= first <= 5
    assert deadline - flaky.times[1] <= second <= first


def test_retry_after_is_honoured_and_capped() -> None:
    flaky = Flaky(1, TransientError("rate_limited", "x", retry_after=0.2))
    waits = RecordedWaits()
    call_with_retries(flaky, policy=FAST, cancel=waits)
    assert waits.waits == [0.2]  # the server's wait, not our backoff (at most 0.002 s)

    capped = RetryPolicy(max_attempts=2, base_wait=0.001, max_wait=0.001, max_retry_after=0.01)
    flaky = Flaky(1, TransientError("rate_limited", "x", retry_after=60))
    waits = RecordedWaits()
    call_with_retries(flaky, policy=capped, deadline=time.monotonic() + 5, cancel=waits)
    assert waits.waits == [0.01]
    assert len(flaky.timeouts) == 2


def test_wait_past_deadline_is_not_started() -> None:
    flaky = Flaky(10, TransientError("rate_limited", "quota", retry_after=10))
    waits = RecordedWaits()
    with pytest.raises(ModelError) as info:
        call_with_retries(flaky, policy=FAST, deadline=time.monotonic() + 1, cancel=waits)
    assert len(flaky.timeouts) == 1
    assert waits.waits == []  # a wait that would end past the deadline is not started
    assert info.value.kind == "rate_limited"
    assert "deadline" in info.value.message


def test_backoff_grows_exponentially_within_bounds() -> None:
    policy = RetryPolicy(max_attempts=4, base_wait=0.02, max_wait=0.05)
    waits = RecordedWaits()
    flaky = Flaky(3, TransientError("server", "x"))
    call_with_retries(flaky, policy=policy, cancel=waits)
    first, second, third = waits.waits
    # Waits are base*2**(n-1) capped at max_wait, times a jitter factor in [0.5, 1]: read
    # from the waits asked for, not timed (a loaded machine wakes late, never early)
    assert first is not None and 0.01 <= first <= 0.02
    assert second is not None and 0.02 <= second <= 0.04
    assert third is not None and 0.025 <= third <= 0.05


def test_deadline_passed_before_first_attempt() -> None:
    flaky = Flaky(0, TransientError("server", "x"))
    with pytest.raises(ModelError) as info:
        call_with_retries(flaky, policy=FAST, deadline=time.monotonic() - 0.1)
    assert info.value.kind == "timeout"
    assert flaky.timeouts == []


def test_cancel_during_wait() -> None:
    cancel = threading.Event()
    failed_once = threading.Event()

    def attempt(timeout: float | None) -> str:
        failed_once.set()
        raise TransientError("rate_limited", "x", retry_after=30)

    outcome: list[BaseException] = []

    def run() -> None:
        try:
            call_with_retries(attempt, policy=FAST, cancel=cancel)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    assert failed_once.wait(60)
    cancel.set()
    thread.join(timeout=20)  # a cut wait returns at once; uncut, it would wait 30 s
    assert not thread.is_alive()
    assert isinstance(outcome[0], ModelError)
    assert outcome[0].kind == "cancelled"


def test_cancel_before_attempt() -> None:
    cancel = threading.Event()
    cancel.set()
    flaky = Flaky(0, TransientError("server", "x"))
    with pytest.raises(ModelError) as info:
        call_with_retries(flaky, policy=FAST, cancel=cancel)
    assert info.value.kind == "cancelled"
    assert flaky.timeouts == []


def test_policy_validation() -> None:
    with pytest.raises(ValueError, match="max_attempts"):
        RetryPolicy(max_attempts=0)
    with pytest.raises(ValueError, match="waits"):
        RetryPolicy(base_wait=-1)
