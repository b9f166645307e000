"""A batch's plain roots admitted in batch steps (``supervision/root_batch.py``) come to what
admitting the same requests one by one does: the same replies (refusals and their reasons,
queued or not), records, events (kinds, data and order per run), start effects, slots and
queue, policy entries (retries, budget, policy). Differential: one core admits the requests
as one ``spawn_many``, another each with ``spawn``; both on fixed clocks, their writes
carried out on a ``MemoryStore`` each. No threads: the core alone."""

from __future__ import annotations

from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from subagents.definitions.spec import AgentSpec
from subagents.messages import SpawnReply, SpawnRequest
from subagents.store.memory import MemoryStore
from subagents.store.writes import write_all
from subagents.supervision.core import SupervisorCore
from subagents.supervision.effects import ArmDeadline, Decision, StartRun, TellOutside
from subagents.supervision.limits import Limits

SPECS = {
    "echo": AgentSpec(name="echo", description="echo"),
    "tiered": AgentSpec(name="tiered", description="tiered", tier=1),
    "budgeted": AgentSpec(name="budgeted", description="budgeted", token_budget=500),
    "talker": AgentSpec(name="talker", description="talker", topics=["news"]),
}


def _core(limits: Limits) -> tuple[SupervisorCore, MemoryStore]:
    store = MemoryStore()
    core = SupervisorCore(
        lookup=SPECS.get,
        names=lambda: sorted(SPECS),
        read_run=store.get_run,
        limits=limits,
        clock=lambda: 500.0,
        now=lambda: 1000.0,
        owner="test",
    )
    return core, store


def _request(i: int, agent: str, run_id: str | None, extra: str) -> SpawnRequest:
    fields: dict[str, Any] = {}
    if extra == "budget":
        fields["token_budget"] = 100
    elif extra == "retries":
        fields["max_retries"] = 1
    elif extra == "cost":
        fields["cost_budget_usd"] = 1.5
    elif extra == "on_failure":
        fields["on_failure"] = "retry"
    elif extra == "shared":
        fields["shared"] = {"k": 1}
    elif extra == "model":
        fields["model"] = "haiku"
    elif extra == "detach":  # (refused: a root has no parent to outlive)
        fields["detach"] = True
    elif extra == "background":
        fields["background"] = True
    elif extra == "huge":
        fields["task"] = "x" * 2_000_000  # refused by its fields (unless filed as checked)
    fields.setdefault("task", f"task {i}")
    return SpawnRequest(request_id=f"q{i}", agent=agent, run_id=run_id, **fields)


_requests = st.lists(
    st.tuples(
        st.sampled_from(["echo", "echo", "echo", "tiered", "budgeted", "talker", "missing"]),
        st.sampled_from([None, "r-a", "r-b", "r-c", "r-d", "r-e", "r-f", "r-g"]),
        st.sampled_from(
            [
                *("", "", "", "budget", "cost", "retries", "on_failure", "shared"),
                *("model", "detach", "background", "huge"),
            ]
        ),
        st.booleans(),  # filed as checked by the runtime
    ),
    min_size=1,
    max_size=14,
)


def _view(core: SupervisorCore, store: MemoryStore, replies: list[SpawnReply]) -> dict[str, Any]:
    """What a reader sees, keyed by request id (a run id the core made differs per core)."""
    by_run = {r.run_id: r.request_id for r in replies if r.run_id is not None}
    records = {}
    for record in store.list_runs():
        ids = {"run_id": None, "root_run_id": None}
        records[by_run[record.run_id]] = msgspec.structs.asdict(record) | ids
    events: dict[str, list[tuple[str, Any]]] = {}
    for run_id, request_id in by_run.items():
        events[request_id] = [(e.kind.value, e.data) for e in store.events(run_id)]
    entries = core.admission.policies.entries  # (each run's policy, retries, budget, seed)
    policies = {
        request_id: msgspec.structs.asdict(entry)
        for run_id, request_id in by_run.items()
        if (entry := entries.get(run_id)) is not None
    }
    slots = core.slots
    return {
        "policies": policies,
        "replies": [(r.request_id, r.run_id is not None, r.queued, r.error) for r in replies],
        "records": records,
        "events": events,
        "slots": (slots.in_flight, slots.peak, dict(+slots.by_agent), dict(+slots.by_tier)),
        "queued": [by_run.get(run_id) for run_id in slots.waiting[1]],
    }


def _effects(decisions: list[Decision], replies: list[SpawnReply]) -> list[tuple[Any, ...]]:
    by_run = {r.run_id: r.request_id for r in replies if r.run_id is not None}
    seen: list[tuple[Any, ...]] = []
    for decision in decisions:
        for effect in decision.effects:
            if isinstance(effect, StartRun):
                seen.append(("start", by_run[effect.record.run_id], effect.deadline))
                seen.append((effect.attempt, effect.standing, effect.park_at_wait))
            elif isinstance(effect, ArmDeadline):
                seen.append(("arm", by_run[effect.run_id], effect.deadline))
            elif isinstance(effect, TellOutside):
                seen.append(("told", getattr(effect.message, "error", None)))
    return seen


def _file(core: SupervisorCore, reqs: list[SpawnRequest], checked: list[bool]) -> None:
    for req, filed in zip(reqs, checked, strict=True):
        if filed:
            core.admission.checked.requests[req.request_id] = req


@settings(max_examples=150, deadline=None)
@given(_requests, st.integers(1, 6), st.integers(1, 6), st.integers(1, 4))
def test_a_batch_admits_as_one_by_one_does(
    drawn: list[tuple[str, str | None, str, bool]], concurrency: int, per_agent: int, bound: int
) -> None:
    limits = Limits(
        max_concurrency=concurrency,
        per_agent=per_agent,
        per_tier={1: 2},
        queue_bound=bound,
    )
    reqs = [_request(i, agent, run_id, extra) for i, (agent, run_id, extra, _) in enumerate(drawn)]
    checked = [filed for *_, filed in drawn]

    batch, batch_store = _core(limits)
    _file(batch, reqs, checked)
    decision = batch.spawn_many(reqs)
    write_all(batch_store, decision.writes)
    batch_replies = list(decision.reply)

    alone, alone_store = _core(limits)
    _file(alone, reqs, checked)
    decisions = []
    for req in reqs:
        one = alone.spawn(req)
        write_all(alone_store, one.writes)
        decisions.append(one)
    alone_replies = [d.reply for d in decisions]

    assert _view(batch, batch_store, batch_replies) == _view(alone, alone_store, alone_replies)
    assert _effects([decision], batch_replies) == _effects(decisions, alone_replies)


def test_a_bug_in_one_batched_root_fails_it_alone() -> None:
    """A root whose admission raises (here its run id, filed as checked, cannot be hashed)
    is answered with the error, and the roots around it are admitted as ever."""
    core, store = _core(Limits(max_concurrency=10, per_agent=10))
    reqs = [SpawnRequest(request_id=f"q{i}", agent="echo", task="t") for i in range(5)]
    reqs[2] = SpawnRequest(request_id="q2", agent="echo", task="t", run_id=["bad"])  # type: ignore[arg-type]
    _file(core, reqs, [True] * 5)
    decision = core.spawn_many(reqs)
    write_all(store, decision.writes)
    replies = list(decision.reply)
    assert [r.error is None for r in replies] == [True, True, False, True, True]
    assert replies[2].error is not None and "could not handle" in replies[2].error
    assert core.slots.in_flight == 4
    assert {r.run_id for r in store.list_runs()} == {r.run_id for r in replies if r.run_id}


@settings(max_examples=100, deadline=None)
@given(
    st.integers(1, 8),
    st.lists(st.tuples(st.integers(0, 9), st.booleans(), st.booleans()), max_size=20),
)
def test_a_line_of_waiting_reports_settles_as_one_by_one_does(
    runs: int, drawn: list[tuple[int, bool, bool]]
) -> None:
    """Waiting reports settled as one line (``settled``) come to what each decided alone
    (``waiting_changed``) does: records, events, the slots' idle holders and queue. Runs
    under a limit of 3 (some queued: a report of theirs is discarded), ids past them
    unknown."""
    from subagents.messages import WaitingChanged

    cores = [_core(Limits(max_concurrency=3, per_agent=3, queue_bound=10)) for _ in range(2)]
    reqs = [
        SpawnRequest(request_id=f"q{i}", agent="echo", task="t", run_id=f"r-{i}")
        for i in range(runs)
    ]
    reports = [
        WaitingChanged(run_id=f"r-{i}", waiting=waiting, parked=parked, attempt=1)
        for i, waiting, parked in drawn
    ]
    for core, store in cores:
        write_all(store, core.spawn_many(reqs).writes)
    (line, line_store), (alone, alone_store) = cores
    settled = line.settled(reports)
    assert settled.reply == ()  # (none failed: a report alone never raises either)
    write_all(line_store, settled.writes)
    for report in reports:
        write_all(alone_store, alone.waiting_changed(report).writes)

    def seen(core: SupervisorCore, store: MemoryStore) -> tuple[Any, ...]:
        records = sorted(msgspec.structs.asdict(r).items().__repr__() for r in store.list_runs())
        kept = [s.event for s in store.events_after(0)]
        events = [(e.run_id, e.kind.value, e.data, e.ts) for e in kept]
        slots = core.slots
        return records, events, list(slots._idle), list(slots.waiting[1]), slots.in_flight

    assert seen(line, line_store) == seen(alone, alone_store)


class _CutOnce(str):
    """A task whose first cut raises: a bug in a root's admission after its run is held
    (``root_batch._admit`` cuts the task for its ``spawned`` event after ``runs.add``)."""

    def __getitem__(self, key: Any) -> str:
        if not getattr(self, "cut", False):
            self.cut = True
            raise RuntimeError("a bug after the run is held")
        return str.__getitem__(self, key)


def test_a_bug_after_a_batched_root_is_held_loses_what_it_decided() -> None:
    """A root of a stretch that raises once held (its topics joined) ends failed as one
    admitted alone does: what it decided before it raised (its subscription's write) is
    lost with the error, not written, and the runs around it are admitted as ever."""

    def requests() -> list[SpawnRequest]:
        return [
            SpawnRequest(
                request_id=f"q{i}",
                agent="talker",
                run_id=f"r-{i}",
                task=_CutOnce("t") if i == 1 else "t",
            )
            for i in range(3)
        ]

    def kinds(decisions: list[Decision]) -> tuple[list[tuple[str, str | None]], ...]:
        """The writes and the effects, each in order: their types and runs."""
        seen: tuple[list[tuple[str, str | None]], ...] = ([], [])
        for decision in decisions:
            for into, items in zip(seen, (decision.writes, decision.effects), strict=True):
                for item in items:
                    run = getattr(item, "record", None) or getattr(item, "event", None)
                    into.append((type(item).__name__, getattr(run, "run_id", None)))
        return seen

    limits = Limits(max_concurrency=10, per_agent=10)
    batch, batch_store = _core(limits)
    reqs = requests()
    _file(batch, reqs, [True] * 3)
    decision = batch.spawn_many(reqs)
    write_all(batch_store, decision.writes)

    alone, alone_store = _core(limits)
    reqs = requests()
    _file(alone, reqs, [True] * 3)
    decisions = [alone.spawn(req) for req in reqs]
    for one in decisions:
        write_all(alone_store, one.writes)

    replies = list(decision.reply)
    assert [r.error is None for r in replies] == [True, True, True]  # (q1: ended failed)
    assert [r.run_id for r in replies] == ["r-0", "r-1", "r-2"]
    assert kinds([decision]) == kinds(decisions)
    assert _view(batch, batch_store, replies) == _view(
        alone, alone_store, [d.reply for d in decisions]
    )


@settings(max_examples=100, deadline=None)
@given(_requests, _requests, st.integers(1, 6), st.integers(1, 6), st.booleans())
def test_a_batch_after_another_admits_as_one_by_one_does(
    before: list[tuple[str, str | None, str, bool]],
    drawn: list[tuple[str, str | None, str, bool]],
    concurrency: int,
    per_agent: int,
    settle: bool,
) -> None:
    """The same, the second batch meeting what an earlier one left: slots held (idle ones
    too, when their runs said they wait), runs queued, run ids in use."""
    from subagents.messages import WaitingChanged

    limits = Limits(
        max_concurrency=concurrency, per_agent=per_agent, per_tier={1: 2}, queue_bound=4
    )
    first = [_request(100 + i, a, r, e) for i, (a, r, e, _) in enumerate(before)]
    reqs = [_request(i, agent, run_id, extra) for i, (agent, run_id, extra, _) in enumerate(drawn)]
    checked = [filed for *_, filed in drawn]
    cores = [_core(limits) for _ in range(2)]
    earlier: list[list[SpawnReply]] = []
    for core, store in cores:
        _file(core, first, [filed for *_, filed in before])
        made = core.spawn_many(first)
        write_all(store, made.writes)
        earlier.append(list(made.reply))
        if settle:  # the runs started say they wait: their slots lendable
            line = [
                WaitingChanged(run_id=r.run_id, waiting=True, parked=False, attempt=1)
                for r in made.reply
                if r.run_id is not None
            ]
            write_all(store, core.settled(line).writes)
        _file(core, reqs, checked)
    (batch, batch_store), (alone, alone_store) = cores
    decision = batch.spawn_many(reqs)
    write_all(batch_store, decision.writes)
    decisions = []
    for req in reqs:
        one = alone.spawn(req)
        write_all(alone_store, one.writes)
        decisions.append(one)
    batch_replies = earlier[0] + list(decision.reply)
    alone_replies = earlier[1] + [d.reply for d in decisions]
    assert _view(batch, batch_store, batch_replies) == _view(alone, alone_store, alone_replies)
    assert _effects([decision], batch_replies) == _effects(decisions, alone_replies)
