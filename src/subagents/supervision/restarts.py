"""Restarts in the OTP sense: which exits restart a run, how often, and after how long.

Why a plain class: restart intensity (at most N restarts within a sliding period) and the
backoff between restarts are decisions, unit tested with a fake clock and a seeded random
generator, while the supervisor actor only carries them out (a timer on the one
TimerService, never a sleeping thread).

- ``temporary`` runs are never restarted.
- ``transient`` runs are restarted after an abnormal exit: a crash (a bug, a tool raising)
  or a model error that outlived the backend's retries. Never after completion,
  cancellation, a timeout or a budget stop, nor after a refusal or hitting ``maxTurns``
  (running again from the same checkpoint would end the same way).
- Intensity: the restarts of a run within the last ``restart_period_s`` seconds are counted;
  one more than ``max_restarts`` and the run fails for good, with its last reason.
- Backoff: ``backoff_s * 2**(attempt-1)``, capped at ``backoff_max_s``, with "equal jitter"
  (half fixed, half random) so restarted siblings do not retry in lockstep.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from subagents.supervision.policy_settings import Policy

NORMAL_ERROR_KINDS = frozenset(
    {
        "cancelled",
        "timeout",
        "budget",
        "max_turns",
        "model_cancelled",
        "model_refusal",
        # a function agent's: its replay went another way than its journal, or it returned
        # a value that cannot be kept; a restart replays the same journal to the same end
        "nondeterministic_replay",
        "bad_result",
    }
)
"""Error kinds that end a run for a reason a restart cannot change."""


def abnormal(error_kind: str | None) -> bool:
    """Whether an exit with ``error_kind`` is abnormal in the OTP sense (restartable)."""
    return error_kind is not None and error_kind not in NORMAL_ERROR_KINDS


@dataclass(frozen=True)
class RestartDecision:
    """Restart after ``delay_s`` as attempt ``attempt``, or give up (``restart`` False)."""

    restart: bool
    attempt: int = 0
    delay_s: float = 0.0
    reason: str = ""


class RestartIntensity:
    """Restart times per run in a sliding window, and the backoff of the next attempt."""

    def __init__(
        self,
        *,
        clock: Callable[[], float],
        rng: random.Random | None = None,
    ) -> None:
        self.clock = clock
        self.rng = rng or random.Random()
        self._times: dict[str, deque[float]] = {}
        self._attempts: dict[str, int] = {}

    def decide(self, run_id: str, policy: Policy, error_kind: str | None) -> RestartDecision:
        """Whether the run that just exited with ``error_kind`` restarts, and when."""
        if policy.restart != "transient":
            return RestartDecision(False, reason="restart policy is temporary")
        if not abnormal(error_kind):
            return RestartDecision(False, reason=f"{error_kind or 'completion'} is a normal exit")
        now = self.clock()
        window = self._times.setdefault(run_id, deque())
        while window and window[0] <= now - policy.restart_period_s:
            window.popleft()
        if len(window) >= policy.max_restarts:
            return RestartDecision(
                False,
                reason=(
                    f"restart intensity reached: {len(window)} restarts within"
                    f" {policy.restart_period_s:g} s (max {policy.max_restarts})"
                ),
            )
        window.append(now)
        attempt = self._attempts.get(run_id, 0) + 1
        self._attempts[run_id] = attempt
        return RestartDecision(True, attempt=attempt, delay_s=self.backoff(policy, attempt))

    def backoff(self, policy: Policy, attempt: int) -> float:
        ceiling = min(policy.backoff_max_s, policy.backoff_s * 2.0 ** max(0, attempt - 1))
        return ceiling / 2 + self.rng.uniform(0, ceiling / 2)

    def in_window(self, run_id: str, policy: Policy) -> int:
        """Restarts of ``run_id`` counted in the current window."""
        now = self.clock()
        return sum(1 for t in self._times.get(run_id, ()) if t > now - policy.restart_period_s)

    def forget(self, run_id: str) -> None:
        self._times.pop(run_id, None)
        self._attempts.pop(run_id, None)
