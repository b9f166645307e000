"""An LLM run's last step and its end, told in one ``Batch`` and reaching the supervisor
alone, are decided straight (``actors/alone.last_steps``), without a store group opened
around them; what they must keep: the step's records before the end's, both in one
transaction, the step's usage on the run, and the answers when the store refuses the
step's checkpoint or breaks on it. The failures are real: a store whose ``save_checkpoint``
refuses one run's (a ``StoreError``: the store failed) or breaks on it (a ``TypeError``:
a bug)."""

from __future__ import annotations

import threading
from typing import Any

from polling import wait_until
from subagents import FunctionAgent
from subagents.behaviour.function import AgentContext
from subagents.definitions.spec import AgentSpec
from subagents.messages import (
    Checkpoint,
    Event,
    EventKind,
    ModelRequest,
    ModelResponse,
    RunFinished,
    RunStatus,
    StepTaken,
)
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime
from subagents.store.base import StoreError
from subagents.store.memory import MemoryStore

WAIT = 60.0
REFUSED = "refused"  # the task whose checkpoint the store refuses
BUGGY = "buggy"  # the task whose checkpoint the store breaks on

WORKER = AgentSpec(name="w", description="One turn, no tools.", tools=())
USAGE_120 = {"input_tokens": 90, "output_tokens": 30}
SCRIPT = {"w": [{"text": "done", "usage": {"input_tokens": 7, "output_tokens": 3}}]}


class NotingStore(MemoryStore):
    """A memory store that notes, for each checkpoint, whether the supervisor had a group
    open when it was written (``supervisor``: set once the runtime is up), and refuses or
    breaks on the checkpoint of a run whose task says so."""

    def __init__(self) -> None:
        super().__init__()
        self.supervisor: Any = None
        self.in_group: list[bool] = []
        self.tasks: dict[str, str] = {}

    def save_checkpoint(self, checkpoint: Checkpoint) -> None:
        if self.supervisor is not None:
            self.in_group.append(self.supervisor._group is not None)
        task = self.tasks.get(checkpoint.run_id)
        if task == REFUSED:
            raise StoreError("the disk is full")
        if task == BUGGY:
            raise TypeError("save_checkpoint() broke")
        super().save_checkpoint(checkpoint)

    def save_run(self, record: Any) -> None:
        self.tasks[record.run_id] = record.task
        super().save_run(record)


def _runtime(store: NotingStore) -> Runtime:
    rt = Runtime([WORKER], model=ScriptedModel(SCRIPT), store=store)
    store.supervisor = rt._hosting.supervisor._ref._actor_weakref()
    return rt


def test_a_lone_last_step_and_end_are_decided_without_a_group_in_order() -> None:
    store = NotingStore()
    with _runtime(store) as rt:
        seen: list[tuple[str, EventKind]] = []
        rt.subscribe(lambda event: seen.append((event.run_id, event.kind)))
        for i in range(10):
            outcome = rt.run("w", f"go {i}", wait=WAIT)
            assert outcome.status is RunStatus.COMPLETED and outcome.result == "done"
            run_id = outcome.run_id
            order = [EventKind.SPAWNED, EventKind.STARTED, EventKind.STEP, EventKind.COMPLETED]
            assert [k for r, k in seen if r == run_id] == order  # published, in order
            assert [e.kind for e in rt.store.events(run_id)] == order  # kept, in order
            record = rt.store.get_run(run_id)
            assert record is not None and record.status is RunStatus.COMPLETED
            assert record.steps == 1
            assert (record.usage.input_tokens, record.usage.output_tokens) == (7, 3)
            checkpoint = rt.store.load_checkpoint(run_id)
            assert checkpoint is not None and checkpoint.step == 1
            assert checkpoint.messages[-1].role == "assistant"
            assert checkpoint.messages[-1].text == "done"
    # alone, as most runs end one at a time: decided straight (a deadline tick may, on a
    # loaded machine, be queued behind one run's end and send it through the group)
    assert len(store.in_group) == 10
    assert False in store.in_group, store.in_group


def test_a_last_step_whose_checkpoint_the_store_refuses_is_answered_with_its_error() -> None:
    with _runtime(NotingStore()) as rt:
        outcome = rt.spawn("w", REFUSED).result(timeout=WAIT)
        assert outcome.status is RunStatus.FAILED and outcome.error_kind == "store"
        assert "the disk is full" in (outcome.error or "")


def test_a_last_step_whose_write_breaks_is_answered_and_the_supervisor_goes_on() -> None:
    store = NotingStore()
    with _runtime(store) as rt:
        outcome = rt.spawn("w", BUGGY).result(timeout=WAIT)
        assert outcome.status is RunStatus.FAILED and outcome.error_kind == "supervisor"
        assert "TypeError: save_checkpoint() broke" in (outcome.error or "")
        after = rt.run("w", "ok", wait=WAIT)
        assert after.status is RunStatus.COMPLETED and after.result == "done"
        assert rt.store.load_checkpoint(after.run_id) is not None


class GatedModel(ScriptedModel):
    """The scripted model, each call waiting for ``release`` (``entered`` counts them)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.release = threading.Event()
        self.entered = threading.Semaphore(0)

    def complete(self, request: ModelRequest, **kwargs: Any) -> ModelResponse:
        self.entered.release()
        assert self.release.wait(WAIT)
        return super().complete(request, **kwargs)


def _pause(ctx: AgentContext) -> str:
    return "paused"


def _pairs_in(line: Any) -> int:
    """The last steps with their ends (one ``Batch`` each) in the supervisor's late line.
    Counted there, not as the line's length plus the inbox's: the pause run's own end and
    its ``ReportsDue`` wake-up made two before either worker had reported."""
    pairs = 0
    for _, report in list(line._reports):
        kinds = [type(m) for m in getattr(report, "messages", ())]
        pairs += kinds == [StepTaken, RunFinished]
    return pairs


def test_last_steps_queued_together_are_decided_in_the_group_each_with_its_end() -> None:
    """Two runs' last steps and ends queued behind the supervisor (as a fan-out's children
    end): each pair decided in one decision inside the open group; the first goes over its
    token budget on that step and ends over budget, the other completes."""
    store = NotingStore()
    model = GatedModel({"w": [{"text": "done", "usage": USAGE_120}]})
    gate, held = threading.Event(), threading.Event()

    def hold(event: Event) -> None:  # the supervisor's thread, publishing the pause's start
        if event.kind == EventKind.STARTED and event.agent == "pause":
            held.set()
            assert gate.wait(WAIT)  # meanwhile both runs take their step and end

    agents = [WORKER, FunctionAgent.create("pause", _pause)]
    with Runtime(agents, model=model, store=store) as rt:
        store.supervisor = rt._hosting.supervisor._ref._actor_weakref()
        over = rt.spawn("w", "over", token_budget=100)
        within = rt.spawn("w", "within", token_budget=1000)
        for _ in range(2):
            assert model.entered.acquire(timeout=WAIT)  # both in their model call
        rt.subscribe(hold)
        paused = rt.spawn("pause", "hold the supervisor")
        try:
            assert held.wait(WAIT)
            model.release.set()
            line = store.supervisor.late  # the agents' reports (``LateReports``)
            wait_until(lambda: _pairs_in(line) == 2, "both runs' last steps and ends queued")
        finally:
            gate.set()
        first, second = over.result(timeout=WAIT), within.result(timeout=WAIT)
        assert paused.result(timeout=WAIT).result == "paused"
        assert first.status is RunStatus.BUDGET_EXCEEDED
        assert first.error == "w used 120 tokens of its 100-token budget"
        assert second.status is RunStatus.COMPLETED and second.result == "done"
        for outcome, last in ((first, EventKind.BUDGET_EXCEEDED), (second, EventKind.COMPLETED)):
            kinds = [e.kind for e in rt.store.events(outcome.run_id)]
            assert kinds[:3] == [EventKind.SPAWNED, EventKind.STARTED, EventKind.STEP], kinds
            assert kinds[-1] is last, kinds
            record = rt.store.get_run(outcome.run_id)
            assert record is not None and record.steps == 1
            assert record.usage.input_tokens == 90 and record.usage.output_tokens == 30
            assert rt.store.load_checkpoint(outcome.run_id) is not None
    assert store.in_group == [True, True], store.in_group  # both pairs: in the group
