"""Wakes: the timers one run's agent actor asked for (``AgentPort.wake_after``).

A wake asked for during a handling is armed when that handling ends, not at once: one asked
for and cancelled within the same handling (a ``receive`` answered by the next mail of the
same ``Batch``) never reaches the timer service. When the run ends, the wakes still armed
are cancelled with it.

Apart from the actor because it is its own small state machine, and made only when a run
first asks for a wake: most short runs never do, and a waiting run costs its objects.
"""

from __future__ import annotations

import time
from typing import Any

import pykka

from subagents.actors.timer import TimerService
from subagents.messages import Wake


class Wakes:
    """The wakes of one run: those wanted in the current handling, and those armed."""

    __slots__ = ("armed", "run_id", "timer", "wanted")

    def __init__(self, timer: TimerService, run_id: str) -> None:
        self.timer = timer
        self.run_id = run_id
        self.wanted: dict[str, float] = {}
        """Asked for in this handling, armed when it ends (key -> monotonic deadline)."""
        self.armed: set[str] = set()

    def want(self, key: str, seconds: float) -> None:
        """Wake the run with ``Wake(key)`` in ``seconds``, once this handling ends."""
        self.wanted[key] = time.monotonic() + seconds

    def cancel(self, key: str) -> None:
        if self.wanted.pop(key, None) is not None:
            return  # never armed
        self.armed.discard(key)
        self.timer.cancel(("wake", self.run_id, key))

    def arm(self, ref: pykka.ActorRef[Any], *, ended: bool) -> None:
        """The handling is over: arm what it asked for (nothing, if the run has ended)."""
        wanted, self.wanted = self.wanted, {}
        if ended:
            return
        for key, deadline in wanted.items():
            self.armed.add(key)
            self.timer.tell_at(("wake", self.run_id, key), deadline, ref, Wake(key=key))

    def cancel_all(self) -> None:
        """The run is over: no armed wake fires any more."""
        for key in self.armed:
            self.timer.cancel(("wake", self.run_id, key))
