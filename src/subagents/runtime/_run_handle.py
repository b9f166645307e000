"""RunHandle: what ``Runtime.spawn`` and ``Runtime.attach`` give back for one root run.

Why apart from the Runtime: a handle is the caller's grip on one run (its status, its
outcome, stop, mail, usage) and nothing else; the runtime's waits take handles and ids alike
(``_run_waits``), which needs the type without the whole runtime.
"""

from __future__ import annotations

import math
from typing import Protocol

from subagents.messages import Outcome, RunStatus, TreeUsage
from subagents.runtime._root_waiters import Waiter
from subagents.store.base import RunStore
from subagents.supervision.core import AdmissionError


class RunOwner(Protocol):
    """What a handle asks of the runtime that started its run (``Runtime`` is one): named
    here rather than importing the Runtime, which imports this module."""

    store: RunStore

    def stop(self, run_id: str) -> tuple[str, ...]: ...

    def send(self, run_id: str, text: str) -> str: ...

    def usage(self, run_id: str) -> TreeUsage: ...


def check_timeout(timeout: float | None, name: str = "timeout") -> float | None:
    """A wait's timeout, checked, the same for every wait (``RunHandle.result``,
    ``Runtime.wait_any``/``wait_all``/``wait_ended``, ``run(wait=)``): None waits without
    limit; a number of seconds (a negative one is 0: look, do not wait); NaN is a
    ``ValueError`` naming the argument (it is neither a time nor "no limit": one wait read it
    as "time out at once", another as a type error); anything else a ``TypeError``."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise TypeError(f"{name} must be a number of seconds or None, got {timeout!r}")
    if math.isnan(timeout):
        raise ValueError(f"{name} must be a number of seconds or None, got nan")
    return max(0.0, float(timeout))


class RunHandle:
    """A root run started with ``Runtime.spawn``: its id, status, result, stop and mail."""

    def __init__(self, runtime: RunOwner, run_id: str, waiter: Waiter) -> None:
        self._rt = runtime
        self.run_id = run_id
        self._waiter = waiter

    @property
    def status(self) -> RunStatus:
        record = self._rt.store.get_run(self.run_id)
        return record.status if record is not None else RunStatus.QUEUED

    @property
    def done(self) -> bool:
        return self._waiter.is_set()

    def result(self, timeout: float | None = None) -> Outcome:
        """Wait for the outcome; ``TimeoutError`` if it is not in within ``timeout`` seconds."""
        if not self._waiter.wait(check_timeout(timeout)):
            raise TimeoutError(f"run {self.run_id} did not finish within {timeout} s")
        if self._waiter.refused is not None:
            raise AdmissionError(self._waiter.refused)
        assert self._waiter.outcome is not None
        return self._waiter.outcome

    def stop(self) -> tuple[str, ...]:
        """Stop this run and its subtree; the ids stopped."""
        return self._rt.stop(self.run_id)

    def send(self, text: str) -> str:
        """Mail this run from the outside; the mail id."""
        return self._rt.send(self.run_id, text)

    def usage(self) -> TreeUsage:
        """What this run and its subtree have used so far (``Runtime.usage``)."""
        return self._rt.usage(self.run_id)

    def __repr__(self) -> str:
        return f"RunHandle({self.run_id!r}, status={self.status!s})"
