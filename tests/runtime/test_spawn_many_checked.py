"""``spawn_many`` files the requests it checked on the caller's thread (``CheckedRoots``), as
``spawn`` does, so their admission does not check them again; not one holding ``shared``
values (the caller's objects); and a withdrawn ask leaves none filed.

The supervisor is held by an event subscriber (``Holder``) while the ask is in its inbox."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from polling import wait_until
from subagents.runtime import AdmissionError, RunHandle, Runtime
from subagents.supervision.requests import CheckedRoots

from .conftest import WAIT
from .test_spawn_ask_withdrawn import Holder, _agents


def _checked(rt: Runtime) -> CheckedRoots:
    checked = rt._starts.roots.checked
    assert checked is not None
    return checked


def test_spawn_many_files_what_it_checked_and_admission_takes_it() -> None:
    holder = Holder("hold")
    with Runtime(_agents()) as rt:
        rt.subscribe(holder)
        checked = _checked(rt)
        answer: list[Any] = []
        try:
            held = rt.spawn("hold", "the supervisor is held at its first event")
            assert holder.holding.wait(WAIT)
            jobs: list[Any] = [("quick", f"job {i}") for i in range(3)]
            jobs.append(("quick", "shared", {"shared": {"k": [1]}}))
            asking = threading.Thread(target=lambda: answer.append(rt.spawn_many(jobs)))
            asking.start()
            wait_until(lambda: len(checked.requests) >= 3, "spawn_many filed its requests")
            tasks = sorted(request.task for request in checked.requests.values())
            assert tasks == ["job 0", "job 1", "job 2"]  # not the one with shared values
        finally:
            holder.gate.set()
        asking.join(WAIT)
        assert held.result(timeout=WAIT).result.startswith("did")
        handles = answer[0]
        assert all(isinstance(handle, RunHandle) for handle in handles)
        assert [h.result(timeout=WAIT).result for h in handles][-1] == "did shared"
        assert not checked.requests  # each taken by its admission


def test_a_withdrawn_spawn_many_leaves_nothing_filed() -> None:
    holder = Holder("hold")
    with Runtime(_agents()) as rt:
        rt.subscribe(holder)
        checked = _checked(rt)
        try:
            rt.spawn("hold", "the supervisor is held at its first event")
            assert holder.holding.wait(WAIT)
            rt._starts.ask_timeout = 0.1  # (plus 2 ms per job)
            with pytest.raises(TimeoutError):
                rt.spawn_many([("quick", f"job {i}") for i in range(5)])
            assert not checked.requests
        finally:
            holder.gate.set()


class _Hostile(str):
    """A task whose check raises (a ``str`` subclass passes every type check)."""

    def strip(self, chars: str | None = None) -> str:
        raise RuntimeError("a hostile task")


def test_a_job_whose_check_raises_fails_alone_and_leaves_nothing_filed() -> None:
    with Runtime(_agents()) as rt:
        checked = _checked(rt)
        out = rt.spawn_many([("quick", "a"), ("quick", _Hostile("b")), ("quick", "c")])
        refused = out[1]
        assert isinstance(refused, AdmissionError)
        assert str(refused).startswith("job 1 ('quick'): the request could not be checked")
        assert "RuntimeError: a hostile task" in str(refused)
        first, last = out[0], out[2]
        assert isinstance(first, RunHandle) and isinstance(last, RunHandle)
        assert [first.result(timeout=WAIT).result, last.result(timeout=WAIT).result] == [
            "did a",
            "did c",
        ]
        assert not checked.requests
