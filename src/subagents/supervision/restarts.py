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
from subagents.supervision.run_entry import RunEntry

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
    """Restart times per run in a sliding window, and the backoff of the next attempt.

    Kept in the runs' entries (``RunEntry``: its ``restart_times``, ``restart_attempts``):
    ``entries``, the dict the policy book shares with the budget ledger (one record per run,
    one pop to forget it), or a dict of its own."""

    def __init__(
        self,
        *,
        clock: Callable[[], float],
        rng: random.Random | None = None,
        entries: dict[str, RunEntry] | None = None,
    ) -> None:
        self.clock = clock
        self.rng = rng or random.Random()
        self._entries: dict[str, RunEntry] = {} if entries is None else entries

    def decide(self, run_id: str, policy: Policy, error_kind: str | None) -> RestartDecision:
        """Whether the run that just exited with ``error_kind`` restarts, and when."""
        if policy.restart != "transient":
            return RestartDecision(False, reason="restart policy is temporary")
        if not abnormal(error_kind):
            return RestartDecision(False, reason=f"{error_kind or 'completion'} is a normal exit")
        now = self.clock()
        entry = self._entries.get(run_id)
        if entry is None:
            entry = self._entries[run_id] = RunEntry()
        window = entry.restart_times
        if window is None:
            window = entry.restart_times = deque()
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
        attempt = entry.restart_attempts = entry.restart_attempts + 1
        return RestartDecision(True, attempt=attempt, delay_s=self.backoff(policy, attempt))

    def backoff(self, policy: Policy, attempt: int) -> float:
        ceiling = min(policy.backoff_max_s, policy.backoff_s * 2.0 ** max(0, attempt - 1))
        return ceiling / 2 + self.rng.uniform(0, ceiling / 2)

    def in_window(self, run_id: str, policy: Policy) -> int:
        """Restarts of ``run_id`` counted in the current window."""
        now = self.clock()
        entry = self._entries.get(run_id)
        times = entry.restart_times if entry is not None else None
        return sum(1 for t in times or () if t > now - policy.restart_period_s)

    def forget(self, run_id: str) -> None:
        """Drop the run's entry (the whole entry: in a shared dict, its policy and budget go
        with it)."""
        self._entries.pop(run_id, None)
