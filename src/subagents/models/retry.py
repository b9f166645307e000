"""Retrying transient model failures within a run's deadline, cancellable.

Why our own policy on top of tenacity rather than the SDK's retries: the SDK sleeps with
``time.sleep`` (a stopped run could not interrupt it) and knows nothing of the run's deadline.
Here every wait is ``cancel.wait(seconds)``, a wait that would end past the deadline is not
started at all (the last error is returned instead), each attempt's timeout is the time left,
and the server's ``retry-after`` / ``retry-after-ms`` is honoured.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import msgspec
import tenacity

from subagents.logs import get_logger
from subagents.models.base import CancelSignal, ModelError

T = TypeVar("T")

log = get_logger(__name__)


class RetryPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """How often and how long to retry.

    Backoff before retry n (1-based) is ``min(max_wait, base_wait * 2**(n-1))`` scaled by a
    random factor in [0.5, 1] (jitter, so many agents do not retry in step). A server-given
    ``retry-after`` replaces it, capped at ``max_retry_after``.
    """

    max_attempts: int = 4
    base_wait: float = 0.5
    max_wait: float = 8.0
    max_retry_after: float = 60.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {self.max_attempts}")
        if self.base_wait < 0 or self.max_wait < 0 or self.max_retry_after < 0:
            raise ValueError("waits must be >= 0 seconds")


class TransientError(ModelError):
    """A failed attempt worth repeating; ``retry_after`` is the server's requested wait."""

    def __init__(self, kind: str, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(kind, message, transient=True)
        self.retry_after = retry_after


def call_with_retries(
    attempt: Callable[[float | None], T],
    *,
    policy: RetryPolicy,
    deadline: float | None = None,
    cancel: CancelSignal | None = None,
    what: str = "model call",
    logger: Any = None,
    on_retry: Callable[[], None] | None = None,
) -> T:
    """Run ``attempt(timeout)`` until it succeeds, fails for good, or time/attempts run out.

    ``attempt`` raises ``TransientError`` to be retried and any other ``ModelError`` to fail at
    once. ``timeout`` is the time left to the deadline (None without a deadline). Raises
    ``ModelError``: the last transient error once retries are exhausted, ``cancelled`` when
    ``cancel`` is set, ``timeout`` when the deadline has passed. ``logger`` (a structlog
    logger, bound to the run) gets one line per retry. ``on_retry`` is called when a failed
    attempt is to be tried again, before the wait (a streamed attempt's pieces are void).
    """
    signal: CancelSignal = cancel if cancel is not None else threading.Event()
    bound = logger if logger is not None else log
    attempts = 0
    gave_up_reason: list[str] = []

    def one_attempt() -> T:
        nonlocal attempts
        if signal.is_set():
            raise ModelError("cancelled", f"the run was stopped before the {what}")
        timeout: float | None = None
        if deadline is not None:
            timeout = deadline - time.monotonic()
            if timeout <= 0:
                raise ModelError(
                    "timeout", f"the run's deadline passed before the {what}", transient=True
                )
        attempts += 1
        return attempt(timeout)

    def stop(state: tenacity.RetryCallState) -> bool:
        reason = _why_give_up(state, policy, deadline)
        if reason is not None:
            gave_up_reason.append(f"gave up after {attempts} attempt(s){reason}")
        return reason is not None

    def sleep(seconds: float) -> None:
        if signal.wait(seconds):
            raise ModelError("cancelled", f"the run was stopped while waiting to retry the {what}")

    def before_sleep(state: tenacity.RetryCallState) -> None:
        _log_retry(bound, what, state)
        if on_retry is not None:
            on_retry()

    retrying = tenacity.Retrying(
        retry=tenacity.retry_if_exception_type(TransientError),
        wait=lambda state: _wait_before_retry(state, policy),
        stop=stop,
        sleep=sleep,
        before_sleep=before_sleep,
        reraise=True,
    )
    try:
        return retrying(one_attempt)
    except TransientError as exc:
        reason = gave_up_reason[-1] if gave_up_reason else f"gave up after {attempts} attempt(s)"
        raise ModelError(exc.kind, f"{exc.message} ({reason})", transient=True) from exc


def _wait_before_retry(state: tenacity.RetryCallState, policy: RetryPolicy) -> float:
    """The server's ``retry-after`` (capped), else the policy's jittered exponential backoff."""
    error = state.outcome.exception() if state.outcome is not None else None
    if isinstance(error, TransientError) and error.retry_after is not None:
        return max(0.0, min(float(error.retry_after), policy.max_retry_after))
    backoff = min(policy.max_wait, policy.base_wait * 2.0 ** (state.attempt_number - 1))
    return backoff * random.uniform(0.5, 1.0)


def _why_give_up(
    state: tenacity.RetryCallState, policy: RetryPolicy, deadline: float | None
) -> str | None:
    """None to try again; else the end of the "gave up after N attempt(s)" reason: "" when the
    attempts are used up, ": <why>" when the wait would end past the deadline."""
    if state.attempt_number >= policy.max_attempts:
        return ""
    if deadline is not None:
        left = deadline - time.monotonic()
        if state.upcoming_sleep >= left:
            if left <= 0:
                return ": the run's deadline has passed"
            return (
                f": the next try would wait {state.upcoming_sleep:.2f} s, "
                f"past the run's deadline in {left:.2f} s"
            )
    return None


def _log_retry(bound: Any, what: str, state: tenacity.RetryCallState) -> None:
    error = state.outcome.exception() if state.outcome is not None else None
    bound.info(
        "model.retry",
        what=what,
        attempt=state.attempt_number,
        wait_s=round(state.upcoming_sleep, 3),
        error=str(error),
    )
