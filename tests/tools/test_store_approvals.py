"""Durable approvals in one process: with ``Runtime(approve="store")`` a call that needs a
person's answer is kept in the store as a pending approval, the run waits holding no thread
(lending its slot), and ``rt.answer`` (or any process, through the store) runs or refuses
the call, once. Real actors, a real SQLite file, real Bash under the sandbox."""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from subagents.definitions.spec import AgentSpec
from subagents.messages import ApprovalRecord, Event, EventKind, RunStatus, ToolResultBlock
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime
from subagents.store.approvals import ApprovalRefused
from subagents.store.sqlite import SQLiteStore
from subagents.supervision.limits import Limits
from subagents.tools.permissions import Permissions
from subagents.tools.sandbox_exec import kernel_abi

from .conftest import WAIT, wait_until
from .test_ask_user import ASKER, QUESTIONS


def agent(name: str) -> AgentSpec:
    return AgentSpec(name=name, description=f"The {name} agent.", prompt="You act.")


def appender(line: str) -> dict[str, Any]:
    """A model step calling Bash to append ``line`` to count.txt (asked in default mode)."""
    return {"tool_calls": [{"name": "Bash", "input": {"command": f"echo {line} >> count.txt"}}]}


class Asks:
    """The approval_asked events of a runtime, waited for without sleeping."""

    def __init__(self, rt: Runtime) -> None:
        self.ids: list[str] = []
        self._changed = threading.Condition()
        rt.subscribe(self.on_event)

    def on_event(self, event: Event) -> None:
        if event.kind is EventKind.APPROVAL_ASKED:
            with self._changed:
                self.ids.append(event.data["approval_id"])
                self._changed.notify_all()

    def wait(self, count: int) -> str:
        with self._changed:
            assert self._changed.wait_for(lambda: len(self.ids) >= count, WAIT)
            return self.ids[count - 1]


def results(model: ScriptedModel, name: str) -> list[ToolResultBlock]:
    return [
        b
        for r in model.requests
        if r.agent == name and r.messages[-1].role == "user"
        for b in r.messages[-1].content
        if isinstance(b, ToolResultBlock)
    ]


def store_beside(workspace: Path) -> Path:
    """A store outside the workspace: inside, the runs' commands could write it (refused)."""
    return workspace.parent / f"{workspace.name}.sqlite3"


def runtime(tmp_path: Path, model: ScriptedModel, **options: Any) -> Runtime:
    names = {r: agent(r) for r in ("worker", "other")}
    return Runtime(
        list(names.values()),
        model=model,
        workspace=tmp_path,
        store=SQLiteStore(store_beside(tmp_path)),
        approve="store",
        **options,
    )


def test_an_ask_waits_in_the_store_and_an_allow_runs_the_call_once(tmp_path: Path) -> None:
    model = ScriptedModel({"worker": [appender("one"), {"text": "done: {result0}"}]})
    with runtime(tmp_path, model) as rt:
        asks = Asks(rt)
        handle = rt.spawn("worker", "count")
        approval_id = asks.wait(1)
        (pending,) = rt.approvals()
        assert isinstance(pending, ApprovalRecord)
        assert (pending.approval_id, pending.run_id, pending.agent, pending.tool) == (
            approval_id,
            handle.run_id,
            "worker",
            "Bash",
        )
        assert pending.input == {"command": "echo one >> count.txt"}
        assert "Bash" in pending.reason and pending.requester == "external"
        assert rt.get(handle.run_id).status is RunStatus.WAITING  # type: ignore[union-attr]
        assert not (tmp_path / "count.txt").exists()  # nothing ran before the answer
        answered = rt.answer(approval_id, True, "go ahead")
        assert answered.status == "allowed" and answered.answer == "go ahead"
        assert handle.result(timeout=WAIT).status is RunStatus.COMPLETED
        assert rt.approvals() == []
        with pytest.raises(ApprovalRefused, match="already answered: allowed"):
            rt.answer(approval_id, False)
        with pytest.raises(ApprovalRefused, match="no approval 'ap-nope' in the store"):
            rt.answer("ap-nope", True)
        kinds = [e.kind for e in rt.store.events(handle.run_id)]
    assert (tmp_path / "count.txt").read_text() == "one\n"  # ran once
    assert EventKind.APPROVAL_ASKED in kinds and EventKind.APPROVAL_ANSWERED in kinds
    (result,) = results(model, "worker")
    assert not result.is_error


def test_a_deny_tells_the_model_why_and_runs_nothing(tmp_path: Path) -> None:
    model = ScriptedModel({"worker": [appender("one"), {"text": "done: {result0}"}]})
    with runtime(tmp_path, model) as rt:
        asks = Asks(rt)
        handle = rt.spawn("worker", "count")
        rt.answer(asks.wait(1), False, "not on a Friday")
        assert handle.result(timeout=WAIT).status is RunStatus.COMPLETED
    assert not (tmp_path / "count.txt").exists()
    (result,) = results(model, "worker")
    assert result.is_error
    assert result.content == (
        "Permission to use Bash was denied: not on a Friday (answered through the store)"
    )


def test_a_waiting_run_lends_its_slot_and_holds_no_thread(tmp_path: Path) -> None:
    model = ScriptedModel(
        {"worker": [appender("one"), {"text": "worker done"}], "other": [{"text": "other done"}]}
    )
    with runtime(tmp_path, model, limits=Limits(max_concurrency=1)) as rt:
        asks = Asks(rt)
        waiting = rt.spawn("worker", "count")
        approval_id = asks.wait(1)
        # the one slot is the waiting run's: the other run can work only if it is lent
        other = rt.spawn("other", "go")
        assert other.result(timeout=WAIT).status is RunStatus.COMPLETED
        rt.answer(approval_id, True)
        assert waiting.result(timeout=WAIT).status is RunStatus.COMPLETED
        kinds = [e.kind for e in rt.store.events(waiting.run_id)]
    assert EventKind.PARKED in kinds


def test_an_answer_to_a_run_that_ended_is_refused_naming_why(tmp_path: Path) -> None:
    model = ScriptedModel({"worker": [appender("one"), {"text": "done"}]})
    with runtime(tmp_path, model) as rt:
        asks = Asks(rt)
        handle = rt.spawn("worker", "count")
        approval_id = asks.wait(1)
        rt.stop(handle.run_id)
        assert handle.result(timeout=WAIT).status is RunStatus.CANCELLED
        assert rt.approvals() == []  # no longer listed: nothing waits for it
        with pytest.raises(ApprovalRefused, match=r"its run r\w+ \(worker\) has ended \(cancel"):
            rt.answer(approval_id, True)
    assert not (tmp_path / "count.txt").exists()


def test_a_reason_that_cannot_be_kept_is_refused_and_the_ask_stays_pending(tmp_path: Path) -> None:
    """A lone surrogate (bytes that were not UTF-8) failed inside the store's transaction with
    a UnicodeEncodeError, not the ApprovalRefused that names what was wrong."""
    model = ScriptedModel({"worker": [appender("one"), {"text": "done"}]})
    with runtime(tmp_path, model) as rt:
        asks = Asks(rt)
        handle = rt.spawn("worker", "count")
        approval_id = asks.wait(1)
        with pytest.raises(ApprovalRefused, match=r"the reason is not UTF-8 text \(character 3"):
            rt.answer(approval_id, False, "caf\udce9")
        with pytest.raises(ApprovalRefused, match="the rule to remember is not UTF-8 text"):
            rt.answer(approval_id, True, remember="Bash(caf\udce9:*)")
        assert [a.approval_id for a in rt.approvals()] == [approval_id]
        rt.answer(approval_id, True, "café")
        assert handle.result(timeout=WAIT).status is RunStatus.COMPLETED
    assert (tmp_path / "count.txt").read_text() == "one\n"


def test_questions_are_answered_through_the_store_with_the_answer_text(tmp_path: Path) -> None:
    model = ScriptedModel({"asker": ASKER})
    with Runtime([agent("asker")], model=model, workspace=tmp_path, approve="store",
                 store=SQLiteStore(store_beside(tmp_path))) as rt:  # fmt: skip
        asks = Asks(rt)
        handle = rt.spawn("asker", "go")
        approval_id = asks.wait(1)
        (pending,) = [a for a in rt.approvals() if a.approval_id == approval_id]
        assert pending.tool == "AskUserQuestion" and pending.input == QUESTIONS
        rt.answer(pending.approval_id, True, "SQLite, in .cache/")
        outcome = handle.result(timeout=WAIT)
    assert outcome.result is not None
    assert '"Which store should the cache use?"="SQLite, in .cache/"' in outcome.result


def test_a_remembered_rule_answers_the_trees_later_asks_it_matches(tmp_path: Path) -> None:
    script = [appender("one"), appender("two"), appender("three; rm -f x"), {"text": "done"}]
    model = ScriptedModel({"worker": script})
    with runtime(tmp_path, model) as rt:
        asks = Asks(rt)
        handle = rt.spawn("worker", "count")
        with pytest.raises(ApprovalRefused, match="goes with an allow"):
            rt.answer(asks.wait(1), False, remember="Bash(echo:*)")
        with pytest.raises(ApprovalRefused, match="cannot remember it: permission rule"):
            rt.answer(asks.wait(1), True, remember="Bash(echo")
        rt.answer(asks.wait(1), True, remember="Bash(echo:*)")
        # "two" is allowed by the rule, unasked; "three; rm -f x" runs rm too: asked again
        rt.answer(asks.wait(2), False, "no rm")
        assert handle.result(timeout=WAIT).status is RunStatus.COMPLETED
        assert len(asks.ids) == 2
        assert (tmp_path / "count.txt").read_text() == "one\ntwo\n"
        other_tree = rt.spawn("worker", "again")  # the rule is its tree's, not this one's
        rt.answer(asks.wait(3), False, "enough")
        rt.stop(other_tree.run_id)
    assert (tmp_path / "count.txt").read_text() == "one\ntwo\n"


def test_a_plan_approved_through_the_store_leaves_plan_mode(tmp_path: Path) -> None:
    plan = {"name": "ExitPlanMode", "input": {"plan": "1. write out.txt"}}
    model = ScriptedModel({"worker": [{"tool_calls": [plan]}, appender("one"), {"text": "ok"}]})
    with runtime(tmp_path, model, permissions="plan") as rt:
        asks = Asks(rt)
        handle = rt.spawn("worker", "plan, then write")
        rt.answer(asks.wait(1), True)  # the plan
        rt.answer(asks.wait(2), True)  # then, in default mode, the write is asked
        assert handle.result(timeout=WAIT).status is RunStatus.COMPLETED
    exit_answer, write = results(model, "worker")
    assert exit_answer.content.startswith("Your plan is approved: you have left plan mode")
    assert not write.is_error and (tmp_path / "count.txt").read_text() == "one\n"


def test_a_remembered_rule_never_allows_what_the_permissions_deny(tmp_path: Path) -> None:
    script = [appender("one"), appender("secret"), {"text": "done"}]
    model = ScriptedModel({"worker": script})
    denied = Permissions(deny=("Bash(echo secret:*)",))
    with runtime(tmp_path, model, permissions=denied) as rt:
        asks = Asks(rt)
        handle = rt.spawn("worker", "count")
        rt.answer(asks.wait(1), True, remember="Bash(echo:*)")
        assert handle.result(timeout=WAIT).status is RunStatus.COMPLETED
        assert len(asks.ids) == 1  # the second call was not asked: the deny rule decided
    first, second = results(model, "worker")
    assert not first.is_error
    assert second.is_error and "Bash(echo secret:*)" in second.content
    assert (tmp_path / "count.txt").read_text() == "one\n"


def test_a_rule_remembered_for_a_tree_answers_its_childrens_asks(tmp_path: Path) -> None:
    spawn = {"name": "spawn_subagent", "input": {"agent": "other", "task": "count too"}}
    model = ScriptedModel(
        {
            "worker": [appender("one"), {"tool_calls": [spawn]}, {"text": "{result0_result}"}],
            "other": [appender("two"), {"text": "other counted"}],
        }
    )
    with runtime(tmp_path, model) as rt:
        asks = Asks(rt)
        handle = rt.spawn("worker", "count")
        rt.answer(asks.wait(1), True, remember="Bash(echo:*)")
        outcome = handle.result(timeout=WAIT)
        (child,) = rt.runs(requester=handle.run_id)
    assert outcome.result == "other counted" and len(asks.ids) == 1
    assert child.approvals_in_store  # the tree's route, kept in the child's record
    assert (tmp_path / "count.txt").read_text() == "one\ntwo\n"


def test_a_retried_run_is_asked_again_not_answered_by_its_earlier_attempt(tmp_path: Path) -> None:
    failing = {"error": {"kind": "boom", "message": "scripted failure"}}
    model = ScriptedModel({"worker": [appender("one"), failing]})
    with runtime(tmp_path, model) as rt:
        asks = Asks(rt)
        handle = rt.spawn("worker", "count", on_failure="retry", max_retries=1)
        first = asks.wait(1)
        rt.answer(first, True)
        second = asks.wait(2)  # the retry starts from scratch: its call is a new one
        assert second != first
        rt.answer(second, False, "once is enough")
        assert handle.result(timeout=WAIT).status is RunStatus.FAILED
    assert (tmp_path / "count.txt").read_text() == "one\n"


def test_an_ask_of_a_retried_runs_earlier_attempt_is_neither_listed_nor_answerable(
    tmp_path: Path,
) -> None:
    """A retry starts the run from scratch: the ask its earlier attempt left pending waits for
    nothing. It was listed, and an answer to it was taken ("allowed") and reached no one."""
    calls: list[str] = []

    def flaky(name: str) -> str:
        """Fails the first time it is called."""
        calls.append(name)
        if len(calls) == 1:
            raise RuntimeError("disk full")
        return f"{name} ok"

    bash = appender("one")["tool_calls"][0]
    turn = {"tool_calls": [bash, {"name": "flaky", "input": {"name": "b"}}]}
    model = ScriptedModel({"worker": [turn, {"text": "done"}]})
    with runtime(tmp_path, model, tools=[flaky]) as rt:
        asks = Asks(rt)
        handle = rt.spawn("worker", "count", on_failure="retry", max_retries=1)
        first = asks.wait(1)  # then the flaky call crashes the attempt
        second = asks.wait(2)  # the retry asks for its own call
        assert [a.approval_id for a in rt.approvals()] == [second]
        with pytest.raises(ApprovalRefused, match=r"retried from scratch since it asked \(retry 1"):
            rt.answer(first, True)
        rt.answer(second, True)
        assert handle.result(timeout=WAIT).status is RunStatus.COMPLETED
    assert (tmp_path / "count.txt").read_text() == "one\n"


APPROVER = """
import os, sys, time
sys.path[:0] = {path!r}
from subagents.store.sqlite import SQLiteStore
store = SQLiteStore({store!r})
while not os.path.exists("stop"):
    for approval in store.list_approvals(pending=True):
        store.answer_approval(approval.approval_id, True, "self-approved")
    time.sleep(0.05)
"""


@pytest.mark.skipif(kernel_abi() < 1, reason="the kernel offers no Landlock")
def test_a_command_cannot_answer_its_own_approval_to_leave_the_sandbox(tmp_path: Path) -> None:
    """A trial: a Bash of an acceptEdits run starts a background process that answers the
    run's pending approvals in the store, then asks to run outside the sandbox. With the
    store in the workspace the runtime does not start (tests/tools/test_store_reach.py);
    beside it, the kernel refuses the process the store: the ask waits for a person."""
    workspace, outside = tmp_path / "ws", tmp_path / "outside"
    workspace.mkdir()
    outside.mkdir()
    store = store_beside(workspace)
    source = [p for p in sys.path if (Path(p) / "subagents").is_dir()]
    (workspace / "approver.py").write_text(APPROVER.format(path=source, store=str(store)))
    # a background shell: a command's processes, its daemons too, are killed when it ends
    start = {"command": f"{sys.executable} approver.py > approver.log 2>&1",
             "run_in_background": True}  # fmt: skip
    leave = {"command": f"echo out > {outside}/escaped", "dangerouslyDisableSandbox": True}
    calls = [{"name": "Bash", "input": start}, {"name": "Bash", "input": leave}]
    model = ScriptedModel({"worker": [{"tool_calls": [c]} for c in calls] + ["done"]})
    permissions = Permissions(mode="acceptEdits", allow=("Bash",))
    log = workspace / "approver.log"
    try:
        with Runtime([agent("worker")], model=model, workspace=workspace, store=store,
                     approve="store", permissions=permissions) as rt:  # fmt: skip
            asks = Asks(rt)
            handle = rt.spawn("worker", "go")
            ask = asks.wait(1)
            # its last line: a traceback's earlier ones are written first
            denied = "StoreError: " + f"{store}: read-only path"
            wait_until(lambda: log.exists() and denied in log.read_text(), what="approver fails")
            assert [a.approval_id for a in rt.approvals()] == [ask]  # still pending
            rt.answer(ask, False, "no")
            assert handle.result(timeout=WAIT).status is RunStatus.COMPLETED
    finally:
        (workspace / "stop").touch()
    assert not (outside / "escaped").exists()
    assert results(model, "worker")[1].is_error
