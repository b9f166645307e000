"""A restore whose writes the store did not keep lets go of the runs it took up
(``Recovery.untake``): they are not held here, hold no slot, and a restore again takes
them up whole. The core is driven without threads; its decisions are not written (as when
the store refused them)."""

from __future__ import annotations

import time

from subagents.definitions.spec import AgentSpec
from subagents.messages import RunRecord, RunStatus
from subagents.store.memory import MemoryStore
from subagents.store.snapshot import read_snapshot
from subagents.supervision.core import SupervisorCore
from subagents.supervision.effects import StartRun, TellOutside
from subagents.supervision.limits import Limits

from .test_core import of

SPECS = {"lead": AgentSpec(name="lead", description="d")}


def _orphans(store: MemoryStore) -> list[str]:
    """Three trees of a runtime that is gone: a running root with a running child, a
    queued root, and a running root whose agent is no longer defined."""
    now = time.time()
    made = [("r-a", None, RunStatus.RUNNING), ("r-b", "r-a", RunStatus.RUNNING)]
    made += [("r-c", None, RunStatus.QUEUED), ("r-d", None, RunStatus.RUNNING)]
    for run_id, parent, status in made:
        store.save_run(
            RunRecord(
                run_id=run_id, agent="gone" if run_id == "r-d" else "lead", task="t",
                root_run_id=parent or run_id, parent_run_id=parent, status=status,
                created_at=now, owner="gone:1", token_budget=1000,
            )
        )  # fmt: skip
    return [run_id for run_id, _, _ in made]


def test_a_restore_not_kept_by_the_store_is_let_go_of_and_taken_again_whole() -> None:
    """Before: the core held the runs of a restore whose writes failed, so the store's
    recovery recorded them failed as this runtime's, and a restore again skipped them as
    held (seen: resumed [] the second time)."""
    store = MemoryStore()
    ids = _orphans(store)
    core = SupervisorCore(
        lookup=SPECS.get, names=lambda: list(SPECS), read_run=store.get_run,
        limits=Limits(max_concurrency=1), owner="here:2",
    )  # fmt: skip
    first = core.restore(read_snapshot(store, frozenset()))
    assert sorted(first.reply.resumed) == ["r-a", "r-b"] and first.reply.requeued == ["r-c"]
    assert first.reply.failed == ["r-d"]
    assert core.slots.in_flight == 1 and sorted(s.run_id for s in core.runs) == ids[:3]
    told = [t.message.outcome.run_id for t in of(first.effects, TellOutside)]
    assert told == ["r-d"]
    kept = core.recovery.untake(first.effects)  # the store refused the writes
    assert kept == [e for e in first.effects if not isinstance(e, TellOutside)]
    assert list(core.runs) == [] and core.runs.hosted() == set()
    assert core.slots.in_flight == 0 and core.slots.queued() == []
    assert not core.policies.held()  # nor a policy or budget entry (made only at a step)
    again = core.restore(read_snapshot(store, frozenset()))
    assert sorted(again.reply.resumed) == ["r-a", "r-b"] and again.reply.requeued == ["r-c"]
    assert again.reply.failed == ["r-d"]
    assert [s.record.run_id for s in of(again.effects, StartRun)] == ["r-a"]
    assert core.slots.in_flight == 1 and sorted(s.run_id for s in core.runs) == ids[:3]
    core.recovery.untake([])
    assert list(core.runs) == [] and core.slots.in_flight == 0
