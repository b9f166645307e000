"""A batch of root spawns (``spawn_many``) looks each agent up once and checks it once
(``Admission._proposed``: ``ROOT_SIBLING_CHECKS``): a later root of that agent is still asked
its own fields (unless the runtime checked them: ``CheckedRoots``) and its run id. No
threads: the core alone; the lookup is the test's own function, counted."""

from __future__ import annotations

from collections import Counter

from subagents.definitions.spec import AgentSpec
from subagents.messages import SpawnReply, SpawnRequest
from subagents.supervision.admission_checks import (
    ROOT_CHECKS,
    ROOT_SIBLING_CHECKS,
    SIBLING_CHECKS,
)
from subagents.supervision.core import SupervisorCore

SPECS = {name: AgentSpec(name=name, description=name) for name in ("echo", "other")}


def _core(looked: Counter[str]) -> SupervisorCore:
    def lookup(name: str) -> AgentSpec | None:
        looked[name] += 1
        return SPECS.get(name)

    return SupervisorCore(lookup=lookup, names=lambda: sorted(SPECS))


def _batch(core: SupervisorCore, reqs: list[SpawnRequest]) -> list[SpawnReply]:
    replies = core.spawn_many(reqs).reply
    assert isinstance(replies, tuple)
    return list(replies)


def test_a_batch_of_roots_looks_each_agent_up_once() -> None:
    looked: Counter[str] = Counter()
    core = _core(looked)
    reqs = [
        SpawnRequest(request_id=f"q{i}", agent=("echo", "other")[i % 2], task="go")
        for i in range(10)
    ]
    assert all(reply.error is None for reply in _batch(core, reqs))
    assert looked == {"echo": 1, "other": 1}
    _batch(core, reqs[:2])  # the next batch looks again (a reload between batches counts)
    assert looked == {"echo": 2, "other": 2}


def test_a_later_root_of_a_found_agent_is_still_asked_its_fields_and_run_id() -> None:
    core = _core(Counter())
    first = SpawnRequest(request_id="a", run_id="a", agent="echo", task="go")
    empty = SpawnRequest(request_id="b", agent="echo", task="  ")
    taken = SpawnRequest(request_id="c", run_id="a", agent="echo", task="go")
    unknown = SpawnRequest(request_id="d", agent="ghost", task="go")
    replies = _batch(core, [first, empty, taken, unknown])
    assert replies[0].error is None
    assert "is empty" in (replies[1].error or "")
    assert "run id a is already in use" in (replies[2].error or "")
    assert "unknown agent 'ghost'" in (replies[3].error or "")


def test_a_later_root_the_runtime_checked_is_taken_not_checked_again() -> None:
    """Filed (``CheckedRoots``), a later root's fields are trusted, and it is taken: nothing
    stays filed. Seen with a request the runtime never files (its task is empty)."""
    core = _core(Counter())
    checked = core.admission.checked
    first = SpawnRequest(request_id="a", run_id="a", agent="echo", task="go")
    filed = SpawnRequest(request_id="b", run_id="b", agent="echo", task="  ")
    checked.requests["b"] = filed
    replies = _batch(core, [first, filed])
    assert [reply.error for reply in replies] == [None, None]
    assert not checked.requests


def test_a_later_roots_checks_are_the_root_checks_a_sibling_is_asked_again() -> None:
    """``ROOT_SIBLING_CHECKS`` is ``ROOT_CHECKS`` less what reads only the definition: the
    root checks ``SIBLING_CHECKS`` asks again (a new one in both goes in it too)."""
    assert tuple(c for c in ROOT_CHECKS if c in SIBLING_CHECKS) == ROOT_SIBLING_CHECKS
