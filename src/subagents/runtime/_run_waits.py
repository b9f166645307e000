"""RunWaits: waiting, from a caller's thread, for runs to end (``Runtime.wait_any/wait_all``).

Why apart from the Runtime: a wait is given ids or handles, checks them, and then waits on
``Endings`` (the events of runs ending, with the store read for those that ended before the
wait began); it asks the supervisor nothing. The Runtime keeps the public methods and hands
the work here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from subagents.messages import Outcome, RunRecord
from subagents.runtime._run_endings import Endings
from subagents.runtime._run_handle import RunHandle, check_timeout
from subagents.supervision.core import AdmissionError

__all__ = ["RunWaits", "check_timeout"]


class RunWaits:
    """Waits on ``endings``; ``read_run`` reads a run from the store, once its spawn is
    decided (``RunViews.get``); ``settle(run_id)`` waits for that decision alone; ``check``
    raises when the caller may not wait (the runtime closed, or the supervisor's own
    thread)."""

    def __init__(
        self,
        endings: Endings,
        read_run: Callable[[str], RunRecord | None],
        settle: Callable[[str], None],
        check: Callable[[], None],
    ) -> None:
        self.endings = endings
        self.read_run = read_run
        self.settle = settle
        self.check = check

    def run_ids(self, run_ids: Iterable[str | RunHandle], call: str) -> list[str]:
        """The run ids a wait is given (ids or handles), checked, without duplicates, in
        order."""
        self.check()
        if isinstance(run_ids, str | RunHandle):
            run_ids = [run_ids]
        if not isinstance(run_ids, Iterable):  # (``list(5)`` named neither call nor argument)
            raise TypeError(f"{call}() takes run ids or handles, got {type(run_ids).__name__}")
        given = list(run_ids)
        for run_id in given:  # (before the dict: an unhashable one raised naming nothing)
            if not isinstance(run_id, str | RunHandle):
                raise TypeError(f"{call}(): run ids are strings, got {run_id!r}")
        ids = list(dict.fromkeys(r.run_id if isinstance(r, RunHandle) else r for r in given))
        if not ids:
            raise ValueError(f"{call}() needs at least one run id")
        for handle in given:  # a refused run's handle: no run to wait for, and it says why
            if isinstance(handle, RunHandle):
                self.settle(handle.run_id)
                if handle.refused is not None:
                    raise AdmissionError(f"run {handle.run_id} was refused: {handle.refused}")
        return ids

    def wait_any(self, run_ids: Iterable[str | RunHandle], timeout: float | None) -> Outcome:
        """``Runtime.wait_any``: the outcome of the first to end."""
        ids = self.run_ids(run_ids, "wait_any")
        ended = self.endings.wait(ids, check_timeout(timeout), self.read_run, every=False)
        if not ended:
            raise TimeoutError(f"none of {', '.join(ids)} ended within {timeout} s")
        return next(iter(ended.values()))

    def wait_all(self, run_ids: Iterable[str | RunHandle], timeout: float | None) -> list[Outcome]:
        """``Runtime.wait_all``: every outcome, in the order given."""
        ids = self.run_ids(run_ids, "wait_all")
        ended = self.wait_ended(ids, check_timeout(timeout))
        missing = [r for r in ids if r not in ended]
        if missing:
            raise TimeoutError(f"{', '.join(missing)} did not end within {timeout} s")
        return [ended[r] for r in ids]

    def wait_ended(self, run_ids: Sequence[str], timeout: float | None) -> dict[str, Outcome]:
        """``Runtime.wait_ended``: the outcomes of those that ended within ``timeout``."""
        return self.endings.wait(run_ids, check_timeout(timeout), self.read_run, every=True)
