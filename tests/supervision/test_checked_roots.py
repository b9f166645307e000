"""A root request the runtime checked on its caller's thread is not checked again by its
admission (``requests.CheckedRoots``); only that very object counts, taken once: any other
request, under any id, is checked in full. No threads: the core alone."""

from __future__ import annotations

import msgspec

from subagents.definitions.spec import AgentSpec
from subagents.messages import SpawnReply, SpawnRequest
from subagents.supervision.core import SupervisorCore

SPEC = AgentSpec(name="echo", description="Says its task.")


def _core() -> SupervisorCore:
    return SupervisorCore(
        lookup=lambda name: SPEC if name == "echo" else None, names=lambda: ["echo"]
    )


def _reply(core: SupervisorCore, req: SpawnRequest) -> SpawnReply:
    reply = core.spawn(req).reply
    assert isinstance(reply, SpawnReply)
    return reply


def test_a_checked_request_is_admitted_and_taken_once() -> None:
    core = _core()
    checked = core.admission.checked
    req = SpawnRequest(request_id="r1", run_id="r1", agent="echo", task="go")
    checked.requests["r1"] = req
    assert _reply(core, req).run_id == "r1"
    assert not checked.requests  # taken: a second request under that id is checked again


def test_its_fields_are_not_checked_again_for_the_very_object_filed() -> None:
    """The skip itself, seen with a request the runtime never files (its task is empty):
    filed, its admission trusts the caller's check; not filed, it is refused by that check."""
    core = _core()
    bad = SpawnRequest(request_id="r2", run_id="r2", agent="echo", task="  ")
    assert "is empty" in (_reply(core, bad).error or "")
    core.admission.checked.requests["r3"] = filed = msgspec.structs.replace(
        bad, request_id="r3", run_id="r3"
    )
    assert _reply(core, filed).error is None


def test_another_request_under_a_filed_id_is_checked_in_full() -> None:
    core = _core()
    checked = core.admission.checked
    checked.requests["r4"] = SpawnRequest(request_id="r4", run_id="r4", agent="echo", task="go")
    copy = SpawnRequest(request_id="r4", run_id="r4", agent="echo", task="")  # not the object
    assert "is empty" in (_reply(core, copy).error or "")
    assert not checked.requests  # (taken by the look: it was not this request's)


def test_a_request_whose_id_is_no_string_is_checked_in_full() -> None:
    core = _core()
    core.admission.checked.requests["x"] = SpawnRequest(request_id="x", agent="echo", task="t")
    odd = SpawnRequest(request_id=["x"], agent="echo", task=7)  # type: ignore[arg-type]
    assert "must be strings" in (_reply(core, odd).error or "")
    assert list(core.admission.checked.requests) == ["x"]
