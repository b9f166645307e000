"""RunHandle: what ``Runtime.spawn`` and ``Runtime.attach`` give back for one root run.

Why apart from the Runtime: a handle is the caller's grip on one run (its status, its
outcome, stop, mail, usage) and nothing else; the runtime's waits take handles and ids alike
(``_run_waits``), which needs the type without the whole runtime.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from typing import Protocol, TypeVar

from subagents.messages import Outcome, RunRecord, RunStatus, TreeUsage
from subagents.runtime._root_waiters import Waiter
from subagents.runtime._spawn_window import SpawnWindow
from subagents.runtime._terminal import terminal_state
from subagents.store.base import RunStore
from subagents.supervision.core import AdmissionError

_T = TypeVar("_T")


class _Callers(Protocol):
    def check_caller(self) -> None: ...


class RunOwner(Protocol):
    """What a handle asks of the runtime that started its run (``Runtime`` is one): named
    here rather than importing the Runtime, which imports this module."""

    store: RunStore

    @property
    def _requests(self) -> _Callers:
        """Whose ``check_caller`` refuses a wait on the supervisor's own thread."""

    def get(self, run_id: str) -> RunRecord | None: ...

    def stop(self, run_id: str) -> tuple[str, ...]: ...

    def send(self, run_id: str, text: str) -> str: ...

    def usage(self, run_id: str) -> TreeUsage: ...


_MOST = sys.float_info.max
"""The largest float: an int above it is no limit (``float()`` of it raised ``OverflowError``)."""


def check_timeout(timeout: float | None, name: str = "timeout") -> float | None:
    """A wait's timeout, checked, the same for every wait (``RunHandle.result``,
    ``Runtime.wait_any``/``wait_all``/``wait_ended``, ``run(wait=)``): None waits without
    limit; a number of seconds (a negative one is 0: look, do not wait; infinity, or an int
    past the largest float, is kept as infinity: a wait without limit, ``Waiter.wait``); NaN is a
    ``ValueError`` naming the argument (it is neither a time nor "no limit": one wait read it
    as "time out at once", another as a type error); anything else a ``TypeError``."""
    if timeout is None:
        return None
    kind = timeout.__class__  # (a plain int or float, the usual case: no call made)
    if (kind is float or kind is int) and timeout > 0 and timeout <= _MOST:
        return timeout + 0.0  # (an int as a float: ``float()`` without its call)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise TypeError(f"{name} must be a number of seconds or None, got {timeout!r}")
    if isinstance(timeout, int) and not -_MOST <= timeout <= _MOST:  # no float holds it
        return math.inf if timeout > 0 else 0.0
    if math.isnan(timeout):
        raise ValueError(f"{name} must be a number of seconds or None, got nan")
    return max(0.0, float(timeout))


def run_goes_on(run_id: str, store: RunStore | None = None) -> str:
    """What a wait for ``run_id`` that timed out can do next (``landed``). Named by the run
    id, not the handle's methods: ``run(wait=)`` gives no handle, and ``fan_out`` raises its
    runs' time outs to a caller that never saw theirs. It goes on only while its runtime is
    open (a close cancels every live run: a ``with`` block the error leaves ends it); the
    terminal's commands are named only where a terminal reaches ``store``."""
    said = (
        f"while this runtime is open (its close cancels it): rt.attach({run_id!r}) gives a"
        f" handle to wait for it, rt.stop({run_id!r}) ends it"
    )
    state = terminal_state(store)
    if state is None:
        return said
    return (
        f"{said} (from a terminal: `subagents attach {run_id}{state}`, `subagents stop"
        f" {run_id}{state}`)"
    )


def landed(
    run_id: str,
    waiter: Waiter,
    timeout: float | None,
    given: object = None,
    store: RunStore | None = None,
) -> Outcome:
    """The outcome that lands in ``waiter`` within ``timeout`` seconds (checked already by
    ``check_timeout``; ``given``: as the caller gave it, for the message): ``TimeoutError``
    if none does, ``AdmissionError`` if the run was refused. ``RunHandle.result``, and
    ``Runtime.run`` without a handle made for it (nobody else would see one). A wait that
    times out ends only the wait, never the run: its message says so, and what reaches the
    run (``run_goes_on``)."""
    if not waiter.wait(timeout):
        shown = timeout if given is None else given
        goes_on = run_goes_on(run_id, store)
        raise TimeoutError(f"run {run_id} did not finish within {shown} s; it goes on {goes_on}")
    if waiter.refused is not None:
        raise AdmissionError(waiter.refused)
    assert waiter.outcome is not None
    return waiter.outcome


class RunHandle:
    """A root run started with ``Runtime.spawn``: its id, status, result, stop and mail.

    ``spawn`` returns before the supervisor has decided the run's admission: a refusal that
    depends on the runtime's state (a full queue, a policy or budget, the store failing)
    reaches the handle, and every method says it the same way, ``AdmissionError`` naming
    it; ``done`` is then True. What reads the store (``status``) waits for the decision
    first; what asks the supervisor (``stop``, ``send``, ``usage``) is behind it anyway.
    Shown (``repr``), it never waits: it says what it knows now."""

    def __init__(
        self,
        runtime: RunOwner,
        run_id: str,
        waiter: Waiter,
        *,
        agent: str | None = None,
        window: SpawnWindow | None = None,
    ) -> None:
        self._rt = runtime
        self.run_id = run_id
        self.agent = agent
        """The run's agent (None: not known here, a ``continue_run``'s)."""
        self._waiter = waiter
        self._window = window  # the spawns told and not decided yet (``repr`` looks)

    @property
    def status(self) -> RunStatus:
        """Where the run is now, once its admission is decided (``wait_admitted``)."""
        return self.wait_admitted()

    def wait_admitted(self) -> RunStatus:
        """Wait until the supervisor has decided this run's admission; its status then.
        ``AdmissionError`` naming why it was refused; ``TimeoutError`` naming the stall
        when the supervisor decides nothing for 30 s. An ended run's status is its
        outcome's, read from the handle (the runtime and its store may be closed)."""
        waiter = self._waiter
        if not waiter.is_set():
            record = self._rt.get(self.run_id)  # waits for the decision of its spawn
            if record is not None:
                return record.status
        self._check_admitted()
        outcome = waiter.outcome  # ended (and perhaps swept), or cancelled before it began
        return outcome.status if outcome is not None else RunStatus.QUEUED

    @property
    def refused(self) -> str | None:
        """Why the supervisor refused this run (None: admitted, or not decided yet)."""
        return self._waiter.refused

    def _check_admitted(self) -> None:
        refused = self._waiter.refused
        if refused is not None:
            raise AdmissionError(refused)

    @property
    def done(self) -> bool:
        """Whether the run has ended, or was refused."""
        return self._waiter.is_set()

    def result(self, timeout: float | None = None) -> Outcome:
        """Wait for the outcome; ``TimeoutError`` if it is not in within ``timeout`` seconds,
        ``AdmissionError`` if the run was refused. From an event subscriber (the
        supervisor's thread), ``RuntimeError`` unless the outcome is in already: it
        waited for an end its own thread had to decide, to its timeout or for ever."""
        checked = check_timeout(timeout)
        if not self._waiter.is_set():
            self._rt._requests.check_caller()
        return landed(self.run_id, self._waiter, checked, timeout, self._rt.store)

    def stop(self) -> tuple[str, ...]:
        """Stop this run and its subtree; the ids stopped."""
        return self._asked(lambda: self._rt.stop(self.run_id))

    def send(self, text: str) -> str:
        """Mail this run from the outside; the mail id."""
        return self._asked(lambda: self._rt.send(self.run_id, text))

    def usage(self) -> TreeUsage:
        """What this run and its subtree have used so far (``Runtime.usage``)."""
        return self._asked(lambda: self._rt.usage(self.run_id))

    def _asked(self, call: Callable[[], _T]) -> _T:
        """``call``'s answer; ``AdmissionError`` instead of the ``LookupError`` of a run
        that was refused (the ask is behind the spawn: refused before it was answered)."""
        self._check_admitted()
        try:
            return call()
        except LookupError:
            self._check_admitted()
            raise

    def __repr__(self) -> str:
        """What the handle knows now, never waiting for the supervisor or reading the
        store (a handle is logged right after ``spawn``): ``deciding`` (its spawn told, not
        decided yet), ``refused: why``, ``admitted`` (queued or running) or its end."""
        agent = f", agent={self.agent!r}" if self.agent is not None else ""
        # The window first: a refusal lands before its spawn leaves the window (on the
        # supervisor's thread), so a spawn seen out of it shows its refusal when it had one.
        # The waiter first, a refusal landing in between showed the run ``admitted``.
        deciding = self._window is not None and self.run_id in self._window
        waiter = self._waiter
        if waiter.refused is not None:
            known = f"refused: {waiter.refused}"
        elif waiter.outcome is not None:
            known = f"status={waiter.outcome.status!s}"
        else:
            known = "deciding" if deciding else "admitted"
        return f"RunHandle({self.run_id!r}{agent}, {known})"
