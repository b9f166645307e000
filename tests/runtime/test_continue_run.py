"""``Runtime.continue_run``: a new run of the same agent going on with an ended run's
conversation, whatever way that run ended; the earlier record left as it ended; refusals
that name why; budgets applying as to any run. Real actors, a real SQLite file."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import pytest

from polling import wait_until
from subagents.behaviour.function import AgentContext, SpawnRefused
from subagents.messages import (
    ChatMessage,
    Checkpoint,
    EventKind,
    Outcome,
    RunRecord,
    RunStatus,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from subagents.models.scripted import ScriptedModel
from subagents.runtime import AdmissionError, Runtime
from subagents.store.base import StoreError
from subagents.store.sqlite import SQLiteStore
from subagents.supervision.continuation import NOT_RUN, Continued, conversation

from .conftest import WAIT, Events, requests_of, spec

pytestmark = pytest.mark.usefixtures("no_new_threads")


def _texts(message: ChatMessage) -> list[str]:
    return [b.text for b in message.content if isinstance(b, TextBlock)]


def test_a_completed_run_is_continued_with_its_conversation_then_the_text(
    tmp_path: Path,
) -> None:
    model = ScriptedModel({"a": ["first answer", "second answer"]})
    store = SQLiteStore(tmp_path / "runs.db")
    with Runtime([spec("a")], model=model, store=store) as rt:
        first = rt.spawn("a", "the question")
        assert first.result(timeout=WAIT).result == "first answer"
        before = rt.get(first.run_id)
        again = rt.continue_run(first.run_id, "and then?")
        outcome = again.result(timeout=WAIT)
        assert outcome.status is RunStatus.COMPLETED and outcome.result == "second answer"
        shown = requests_of(model, "a")[-1].messages
        assert [m.role for m in shown] == ["user", "assistant", "user"]
        assert "the question" in _texts(shown[0])[0]
        assert _texts(shown[1]) == ["first answer"]
        assert _texts(shown[2]) == ["and then?"]
        assert rt.get(first.run_id) == before  # the earlier record stays as it ended
        record = rt.get(again.run_id)
        assert record is not None and record.continues == first.run_id
        assert record.agent == "a" and record.task == "and then?"
        assert record.parent_run_id is None and record.root_run_id == again.run_id
    # the link is in the store, for another process to read
    reopened = SQLiteStore(tmp_path / "runs.db")
    try:
        stored = reopened.get_run(again.run_id)
        assert stored is not None and stored.continues == first.run_id
    finally:
        reopened.close()


def test_a_continuation_can_be_continued_and_forked() -> None:
    model = ScriptedModel({"a": ["one", "two", "three"]})
    with Runtime([spec("a")], model=model) as rt:
        first = rt.spawn("a", "start")
        first.result(timeout=WAIT)
        second = rt.continue_run(first.run_id, "more")
        assert second.result(timeout=WAIT).result == "two"
        third = rt.continue_run(second.run_id, "even more")
        assert third.result(timeout=WAIT).result == "three"
        assert len(requests_of(model, "a")[-1].messages) == 5
        fork = rt.continue_run(first.run_id, "another way")  # a fork: from the earlier run
        assert fork.result(timeout=WAIT).result == "two"
        shown = requests_of(model, "a")[-1].messages
        assert _texts(shown[-1]) == ["another way"] and len(shown) == 3


def test_a_failed_run_is_continued() -> None:
    model = ScriptedModel(
        {"a": [{"error": {"kind": "overloaded", "message": "try later"}}, "recovered"]}
    )
    with Runtime([spec("a")], model=model) as rt:
        first = rt.spawn("a", "the task")
        assert first.result(timeout=WAIT).status is RunStatus.FAILED
        again = rt.continue_run(first.run_id, "try again")
        outcome = again.result(timeout=WAIT)
        # no step was taken: the earlier run's task, then the text, in one user message
        shown = requests_of(model, "a")[-1].messages
        assert len(shown) == 1 and _texts(shown[0])[-1] == "try again"
        assert "the task" in _texts(shown[0])[0]
        # the script's first turn fails again (no assistant turn yet): failed, as scripted
        assert outcome.status is RunStatus.FAILED


def test_a_run_timed_out_mid_tool_call_is_continued_with_the_call_answered() -> None:
    model = ScriptedModel(
        {"a": [{"tool_calls": [{"name": "Bash", "input": {"command": "sleep 60"}}]}, "done now"]}
    )
    agent = spec("a", tools=("Bash",))
    with Runtime([agent], model=model, permissions="bypassPermissions") as rt:
        first = rt.spawn("a", "long job", timeout=2.0)
        assert first.result(timeout=WAIT).status is RunStatus.TIMED_OUT
        again = rt.continue_run(first.run_id, "never mind, finish", timeout=WAIT)
        assert again.result(timeout=WAIT).result == "done now"
        shown = requests_of(model, "a")[-1].messages
        assert [m.role for m in shown] == ["user", "assistant", "user"]
        use = next(b for b in shown[1].content if isinstance(b, ToolUseBlock))
        answers = [b for b in shown[2].content if isinstance(b, ToolResultBlock)]
        assert [(r.tool_use_id, r.is_error) for r in answers] == [(use.id, True)]
        assert _texts(shown[2]) == ["never mind, finish"]


def test_unanswered_calls_are_answered_not_run() -> None:
    cp = Checkpoint(
        run_id="r1",
        step=1,
        messages=(
            ChatMessage("user", (TextBlock("task"),)),
            ChatMessage(
                "assistant", (ToolUseBlock("t1", "Bash", {}), ToolUseBlock("t2", "Read", {}))
            ),
        ),
        answered=(ToolResultBlock("t2", "read it"),),
    )
    record = RunRecord(run_id="r1", agent="a", task="task", root_run_id="r1")
    seeded = conversation(Continued(record, cp), run_id="r2", text="go on")
    assert seeded.run_id == "r2" and seeded.step == 0
    last = seeded.messages[-1]
    assert last.role == "user" and _texts(last) == ["go on"]
    answers = [b for b in last.content if isinstance(b, ToolResultBlock)]
    assert [(a.tool_use_id, a.content, a.is_error) for a in answers] == [
        ("t1", NOT_RUN, True),
        ("t2", "read it", False),
    ]


def test_a_started_unanswered_call_is_answered_interrupted_not_not_run() -> None:
    """A call the journal saw start (``Checkpoint.started``) may have run: its effects are
    unknown, as a resumed run tells it, never "not run" (tests/adversary/
    test_approved_call_crash.py has it through a crash, a stop and `subagents continue`)."""
    uses = (ToolUseBlock("t1", "Bash", {}), ToolUseBlock("t2", "Write", {}))
    cp = Checkpoint(
        run_id="r1",
        step=1,
        messages=(ChatMessage("user", (TextBlock("task"),)), ChatMessage("assistant", uses)),
        started=("t1",),
    )
    record = RunRecord(run_id="r1", agent="a", task="task", root_run_id="r1")
    seeded = conversation(Continued(record, cp), run_id="r2", text="go on")
    answers = [b for b in seeded.messages[-1].content if isinstance(b, ToolResultBlock)]
    assert [(a.tool_use_id, a.is_error) for a in answers] == [("t1", True), ("t2", True)]
    assert answers[0].content.startswith(
        "This Bash call was interrupted: its run ended while the call ran, before its result"
    )
    assert "effects are unknown" in answers[0].content
    assert answers[1].content == NOT_RUN  # never started: it did not run


def test_a_run_cancelled_mid_tool_call_is_continued() -> None:
    model = ScriptedModel(
        {"a": [{"tool_calls": [{"name": "Bash", "input": {"command": "sleep 60"}}]}, "resumed"]}
    )
    events = Events()
    with Runtime([spec("a", tools=("Bash",))], model=model, permissions="bypassPermissions") as rt:
        rt.subscribe(events)
        first = rt.spawn("a", "wait for it")
        events.wait_count(EventKind.STEP, "a", 1)  # its Bash call is under way
        rt.stop(first.run_id)
        assert first.result(timeout=WAIT).status is RunStatus.CANCELLED
        again = rt.continue_run(first.run_id, "go")
        assert again.result(timeout=WAIT).result == "resumed"
        shown = requests_of(model, "a")[-1].messages
        assert [m.role for m in shown] == ["user", "assistant", "user"]
        assert _texts(shown[-1]) == ["go"]
        (answer,) = [b for b in shown[-1].content if isinstance(b, ToolResultBlock)]
        assert answer.is_error


def test_a_running_run_is_refused_naming_why() -> None:
    model = ScriptedModel({"a": [{"text": "slow", "delay": 30.0}]})
    with Runtime([spec("a")], model=model) as rt:
        first = rt.spawn("a", "busy")
        with pytest.raises(AdmissionError, match=r"is (running|queued): only an ended run"):
            rt.continue_run(first.run_id, "too soon")
        rt.stop(first.run_id)
        first.result(timeout=WAIT)


def _with_a_listener(path: Path, *answers: str) -> Runtime:
    """A runtime on a SQLite file at ``path``: agent ``a`` answers ``answers`` in turn, and a
    ``listener`` waits for one mail and says what it heard (whether the runtime went on)."""
    listens = {"tool_calls": [{"name": "wait_for_message", "input": {"timeout": WAIT}}]}
    model = ScriptedModel({"a": list(answers), "listener": [listens, "heard: {mail_content}"]})
    agents = [spec("a"), spec("listener", tools=("wait_for_message",))]
    return Runtime(agents, model=model, store=SQLiteStore(path))


@pytest.mark.parametrize(("table", "column"), [("checkpoints", "checkpoint"), ("runs", "record")])
def test_a_run_whose_stored_row_is_damaged_is_refused_and_no_other_run_stops(
    tmp_path: Path, table: str, column: str
) -> None:
    """A row hand-edited into what no record reads as: reading it for the continuation
    raised a ``StoreError`` in the supervisor, taken for the store failing: every run of the
    runtime was stopped (``failed``, "the run store failed")."""
    path = tmp_path / "runs.db"
    with _with_a_listener(path, "first answer", "second answer") as rt:
        first = rt.spawn("a", "the question")
        first.result(timeout=WAIT)
        intact = rt.spawn("a", "another question")
        intact.result(timeout=WAIT)
        with contextlib.closing(sqlite3.connect(path, timeout=WAIT)) as conn, conn:
            damaged = conn.execute(
                f"UPDATE {table} SET {column} = '{{\"messages\": 1' WHERE run_id = ?",
                (first.run_id,),
            )
            assert damaged.rowcount == 1
        listener = rt.spawn("listener", "wait")
        with pytest.raises(AdmissionError) as refused:
            rt.continue_run(first.run_id, "and then?")
        assert str(refused.value).startswith(f"run {first.run_id} cannot be continued: ")
        assert f"cannot read {table} row {first.run_id!r}" in str(refused.value)
        rt.send(listener.run_id, "still here")
        outcome = listener.result(timeout=WAIT)  # not stopped by the refusal
        assert (outcome.status, outcome.result) == (RunStatus.COMPLETED, "heard: still here")
        again = rt.continue_run(intact.run_id, "and then?")  # the runtime goes on
        assert again.result(timeout=WAIT).result == "second answer"


def test_a_store_that_fails_reading_the_run_to_continue_still_halts_the_runtime(
    tmp_path: Path,
) -> None:
    """Only a row that does not decode is the request's own refusal: a read the store
    itself fails (here its checkpoints table gone, as a corrupt file or a lost connection
    would) is the store failing, raised as a ``StoreError`` and halting the runtime, not an
    ``AdmissionError`` that leaves the runtime going on a store that fails."""
    path = tmp_path / "runs.db"
    with _with_a_listener(path, "first answer") as rt:
        first = rt.spawn("a", "the question")
        first.result(timeout=WAIT)
        listener = rt.spawn("listener", "wait")
        wait_until(lambda: listener.status is RunStatus.WAITING, "the listener waits")
        with contextlib.closing(sqlite3.connect(path, timeout=WAIT)) as conn, conn:
            conn.execute("ALTER TABLE checkpoints RENAME TO checkpoints_gone")
        with pytest.raises(StoreError) as failed:
            rt.continue_run(first.run_id, "and then?")
        assert "no such table: checkpoints" in str(failed.value)
        outcome = listener.result(timeout=WAIT)  # stopped: the store failed
        assert outcome.status is RunStatus.FAILED, outcome
        assert "the run store failed" in (outcome.error or ""), outcome


def test_an_unknown_run_is_refused() -> None:
    with Runtime([spec("a")], model=ScriptedModel({})) as rt:
        with pytest.raises(AdmissionError, match="no run 'r-nope' to continue"):
            rt.continue_run("r-nope", "hello")
        with pytest.raises(TypeError, match="unexpected keyword arguments: agent"):
            rt.continue_run("r-nope", "hello", agent="a")  # type: ignore[arg-type]


def test_an_empty_text_is_refused_naming_the_run_it_would_continue() -> None:
    """The request is checked before the continued run's agent is read: the refusal said
    "the task for '' is empty"."""
    with Runtime([spec("a")], model=ScriptedModel({"a": ["one"]})) as rt:
        first = rt.spawn("a", "start")
        first.result(timeout=WAIT)
        with pytest.raises(AdmissionError) as refused:
            rt.continue_run(first.run_id, "  ")
    assert str(refused.value) == (
        f"the text to continue {first.run_id} with is empty: say what comes next"
    )


def test_budgets_apply_to_a_continued_run() -> None:
    model = ScriptedModel({"a": ["one", "two"]})
    with Runtime([spec("a")], model=model) as rt:
        first = rt.spawn("a", "start")
        first.result(timeout=WAIT)
        again = rt.continue_run(first.run_id, "more", token_budget=1)
        outcome = again.result(timeout=WAIT)
        assert outcome.status is RunStatus.BUDGET_EXCEEDED


def _spawn(**args: str) -> dict[str, object]:
    return {"tool_calls": [{"name": "spawn_subagent", "input": {"agent": "worker", **args}}]}


def test_a_lead_continues_its_earlier_child_with_the_spawn_tool() -> None:
    model = ScriptedModel(
        {
            "lead": [
                _spawn(task="first job"),
                _spawn(task="second job", continue_run="{result0_run_id}"),
                "lead: {result0_result}",
            ],
            "worker": ["worker one", "worker two"],
        }
    )
    agents = [spec("lead", tools=("spawn_subagent",)), spec("worker")]
    with Runtime(agents, model=model) as rt:
        outcome = rt.run("lead", "go", wait=WAIT)
        assert outcome.result == "lead: worker two", outcome
        first, second = sorted(
            (r for r in rt.runs() if r.agent == "worker"), key=lambda r: r.created_at
        )
        assert second.continues == first.run_id and first.continues is None
        assert second.parent_run_id == first.parent_run_id == outcome.run_id
        shown = requests_of(model, "worker")[-1].messages
        assert [m.role for m in shown] == ["user", "assistant", "user"]
        assert "first job" in _texts(shown[0])[0] and _texts(shown[2]) == ["second job"]


def test_a_run_may_not_continue_a_run_of_another_tree() -> None:
    model = ScriptedModel(
        {
            "lead": [_spawn(task="{task}", continue_run="{task}"), "lead: {result0}"],
            "worker": ["worker one"],
        }
    )
    agents = [spec("lead", tools=("spawn_subagent",)), spec("worker")]
    with Runtime(agents, model=model) as rt:
        other = rt.spawn("worker", "elsewhere")
        other.result(timeout=WAIT)
        outcome = rt.run("lead", other.run_id, wait=WAIT)
        assert outcome.result is not None
        assert f"run {other.run_id} is not in the tree of {outcome.run_id}" in outcome.result
        assert [r.agent for r in rt.runs() if r.continues is not None] == []


def test_a_function_agent_run_is_continued_with_its_task_and_result_in_ctx() -> None:
    def counter(ctx: AgentContext) -> str:
        said = [_texts(m) for m in ctx.history]
        return f"{ctx.task} after {said} (continues {ctx.continues})"

    with Runtime({"counter": counter}) as rt:
        first = rt.spawn("counter", "one")
        assert first.result(timeout=WAIT).result == "one after [] (continues None)"
        again = rt.continue_run(first.run_id, "two")
        expected = "two after [['one'], ['one after [] (continues None)'], ['two']]"
        assert again.result(timeout=WAIT).result == f"{expected} (continues {first.run_id})"


def test_a_function_agent_continues_its_earlier_child_and_llm_runs() -> None:
    model = ScriptedModel({"worker": ["worker one", "worker two"]})

    async def lead(ctx: AgentContext) -> str | None:
        first: Outcome = await ctx.spawn("worker", "first job")
        second: Outcome = await ctx.continue_run(first.run_id, "second job")
        try:
            await ctx.continue_run("r-nope", "third")
        except SpawnRefused as exc:
            return f"{second.result}; {exc}"
        return None

    with Runtime({"lead": lead, "worker": spec("worker")}, model=model) as rt:
        outcome = rt.run("lead", "go", wait=WAIT)
        assert outcome.result == "worker two; no run 'r-nope' to continue", outcome
        first, second = sorted(
            (r for r in rt.runs() if r.agent == "worker"), key=lambda r: r.created_at
        )
        assert second.continues == first.run_id and second.parent_run_id == outcome.run_id
