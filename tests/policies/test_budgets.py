"""Token and cost budgets: granted, capped by the parent, rolled up, enforced, refused."""

from __future__ import annotations

import threading
from typing import Any

from gates import Tally
from shown import ShownModel
from subagents.messages import EventKind, RunStatus, ToolResultBlock, Usage
from subagents.supervision.budgets import Budget, BudgetBook, BudgetRefused
from subagents.supervision.limits import Limits

from .conftest import spec


def usage(inp: int, out: int, cost: float = 0.0) -> dict[str, Any]:
    return {"input_tokens": inp, "output_tokens": out, "cost_usd": cost}


def ping() -> str:
    """Answer pong."""
    return "pong"


# ---- the ledger alone -------------------------------------------------------------------------


def test_ledger_caps_a_child_by_what_every_ancestor_has_left() -> None:
    book = BudgetBook()
    assert book.grant("root", None, tokens=(1000,)) == Budget(tokens=1000)
    book.grant("mid", "root", tokens=(None,))
    book.charge("root", Usage(input_tokens=300))
    book.charge("mid", Usage(output_tokens=500))
    # root has 1000 - 800 left; mid was granted 1000 at spawn but the root bounds it now
    assert book.available("mid") == Budget(tokens=200)
    assert book.grant("leaf", "mid", tokens=(5000, None)).tokens == 200
    assert book.grant("leaf2", "mid", tokens=(50,)).tokens == 50
    assert book.spent("root").total_tokens == 800


def test_a_child_asking_no_budget_is_unlimited_only_when_nothing_above_holds_one() -> None:
    book = BudgetBook()
    book.grant("root", None)
    book.grant("mid", "root")
    assert book.grant_unlimited("leaf", "mid") == Budget()
    book.charge("leaf", Usage(output_tokens=7))
    assert book.spent("root").output_tokens == 7  # rolled up the unlimited chain all the same
    # a limit above an unlimited parent (a ledger rebuilt from records): ``grant`` decides
    book.restore("top", None, Budget(tokens=100), Usage(input_tokens=40))
    book.restore("under", "top", Budget(), Usage())
    assert book.grant_unlimited("leaf2", "under") is None
    assert not book.known("leaf2")
    assert book.grant("leaf2", "under") == Budget(tokens=60)


def test_ledger_reports_every_run_over_budget_deepest_first() -> None:
    book = BudgetBook()
    book.grant("root", None, tokens=(100,))
    book.grant("child", "root", tokens=(60,))
    assert book.charge("child", Usage(input_tokens=60)) == []  # exactly at budget: not over
    assert book.charge("child", Usage(input_tokens=41)) == ["child", "root"]
    assert book.describe_over("root") == "used 101 tokens of its 100-token budget"


def test_ledger_refuses_a_child_when_nothing_is_left() -> None:
    book = BudgetBook()
    book.grant("root", None, cost_usd=(0.5,))
    book.charge("root", Usage(cost_usd=0.5))
    try:
        book.grant("child", "root", parent_label="lead (root)")
    except BudgetRefused as exc:
        assert str(exc) == "budget: lead (root) has no cost budget (USD) left to give"
    else:
        raise AssertionError("a child was granted a budget from nothing")


def test_ledger_rejects_nonsense_budgets() -> None:
    book = BudgetBook()
    for bad in (0, -5, True):
        try:
            book.grant("r", None, tokens=(bad,))
        except ValueError as exc:
            assert "token budget must be a positive integer" in str(exc)
        else:
            raise AssertionError(f"budget {bad!r} was accepted")


# ---- real actors ------------------------------------------------------------------------------


def test_a_run_over_budget_stops_after_the_call_that_took_it_over(make_runtime: Any) -> None:
    tool_calls = Tally()  # wherever the tool runs

    def count() -> str:
        """Count a call."""
        tool_calls.add("x")
        return "counted"

    turn = {"text": "again", "tool_calls": [{"name": "count", "input": {}}], "usage": usage(50, 10)}
    rt, model, events = make_runtime(
        [spec("lead")], {"lead": [turn, turn, turn, turn]}, tools=[count]
    )
    outcome = rt.run("lead", "go", token_budget=100, wait=60)
    assert outcome.status is RunStatus.BUDGET_EXCEEDED
    assert outcome.error == "lead used 120 tokens of its 100-token budget"
    assert [r.agent for r in model.requests] == ["lead", "lead"]  # one call past 100, no more
    assert tool_calls.peak() == {"x": 1}  # the over-budget turn's tool call never ran
    assert rt.totals(outcome.run_id).tokens == 120
    assert events.of(EventKind.BUDGET_EXCEEDED, outcome.run_id)


def test_a_last_step_over_budget_ends_the_run_over_budget_not_completed(
    make_runtime: Any,
) -> None:
    # The last step is told, not asked (nothing follows it to hold back); it is recorded
    # before the run's end all the same, so going over on it still decides the outcome.
    rt, model, events = make_runtime(
        [spec("lead")], {"lead": [{"text": "the answer", "usage": usage(90, 30)}]}
    )
    outcome = rt.run("lead", "go", token_budget=100, wait=60)
    assert outcome.status is RunStatus.BUDGET_EXCEEDED
    assert outcome.error == "lead used 120 tokens of its 100-token budget"
    assert rt.totals(outcome.run_id).tokens == 120
    assert len(events.of(EventKind.BUDGET_EXCEEDED, outcome.run_id)) == 1
    assert not events.of(EventKind.COMPLETED, outcome.run_id)
    within = rt.run("lead", "go", token_budget=120, wait=60)  # exactly at budget: completed
    assert within.status is RunStatus.COMPLETED and within.result == "the answer"
    assert len(model.requests) == 2


def test_child_budget_is_capped_by_what_the_parent_has_left(make_runtime: Any) -> None:
    rt, _model, _events = make_runtime(
        [spec("lead"), spec("worker", token_budget=10_000)],
        {
            "lead": [
                {
                    "tool_calls": [
                        {"name": "spawn_subagent", "input": {"agent": "worker", "task": "w"}}
                    ],
                    "usage": usage(100, 0),
                },
                {"text": "done", "usage": usage(1, 1)},
            ],
            "worker": [{"text": "ok", "usage": usage(10, 10)}],
        },
    )
    outcome = rt.run("lead", "go", token_budget=500, wait=60)
    assert outcome.status is RunStatus.COMPLETED
    child = next(r for r in rt.runs(root_run_id=outcome.run_id) if r.agent == "worker")
    assert child.token_budget == 400
    assert rt.get(outcome.run_id).token_budget == 500


def test_spawn_refused_when_the_parent_has_nothing_left(make_runtime: Any) -> None:
    rt, model, _events = make_runtime(
        [spec("lead"), spec("worker")],
        {
            "lead": [
                {
                    "tool_calls": [
                        {"name": "spawn_subagent", "input": {"agent": "worker", "task": "w"}}
                    ],
                    "usage": usage(60, 40),
                },
                {"text": "gave up: {result0}", "usage": usage(1, 0)},
            ]
        },
    )
    outcome = rt.run("lead", "go", token_budget=100, wait=60)
    second = [r for r in model.requests if r.agent == "lead"][1]
    result = second.messages[-1].content[0]
    assert isinstance(result, ToolResultBlock) and result.is_error
    assert result.content == (
        f"budget: lead ({outcome.run_id}) has no tokens left to give (0 left)"
    )
    assert [r.agent for r in rt.runs(root_run_id=outcome.run_id)] == ["lead"]
    assert outcome.status is RunStatus.BUDGET_EXCEEDED  # its next call took it over


def test_usage_of_concurrent_children_rolls_up_exactly(make_runtime: Any) -> None:
    n = 5
    spawns = [
        {"name": "spawn_subagent", "input": {"agent": "worker", "task": f"part {i}"}}
        for i in range(n)
    ]
    worker_turns = [
        {"tool_calls": [{"name": "ping", "input": {}}], "usage": usage(7, 3)},
        {"text": "part done", "delay": 0.01, "usage": usage(11, 2, 0.001)},
    ]
    rt, _model, events = make_runtime(
        [spec("lead"), spec("worker")],
        {
            "lead": [
                {"tool_calls": spawns, "usage": usage(100, 20, 0.01)},
                {"text": "all done", "delay": 0.3, "usage": usage(5, 5)},
            ],
            "worker": worker_turns,
        },
        limits=Limits(max_children=n, per_agent=n),
        tools=[ping],
    )
    all_in = threading.Event()

    def seen(_event: Any) -> None:
        if len(events.of(EventKind.COMPLETED)) == n:
            all_in.set()

    rt.subscribe(seen)
    handle = rt.spawn("lead", "go", token_budget=1_000_000)
    assert all_in.wait(60)
    # While the lead's last (slow) call is in flight: the ledger holds every child's calls.
    spent = rt.stats(handle.run_id).spent
    assert spent is not None
    assert spent.total_tokens == 120 + n * (10 + 13)
    assert spent.model_calls == 1 + 2 * n
    assert round(spent.cost_usd, 6) == round(0.01 + n * 0.001, 6)
    for worker in [r for r in rt.runs(root_run_id=handle.run_id) if r.agent == "worker"]:
        worker_spent = rt.stats(worker.run_id).spent
        assert worker_spent is not None and worker_spent.total_tokens == 23
    outcome = handle.result(60)
    totals = rt.totals(outcome.run_id)
    assert totals.tokens == 120 + n * 23 + 10
    assert totals.runs == n + 1
    assert totals.steps == 2 + 2 * n
    assert totals.by_status == {"completed": n + 1}


def test_children_taking_the_parent_over_budget_stop_its_subtree(make_runtime: Any) -> None:
    spawns = [
        {"name": "spawn_subagent", "input": {"agent": "worker", "task": f"w{i}"}} for i in range(3)
    ]
    rt, model, _events = make_runtime(
        [spec("lead"), spec("worker")],
        {
            "lead": [{"tool_calls": spawns, "usage": usage(10, 0)}, "never"],
            "worker": [
                {"tool_calls": [{"name": "ping", "input": {}}], "usage": usage(100, 0)},
                {"tool_calls": [{"name": "ping", "input": {}}], "usage": usage(100, 0)},
                {"text": "late", "delay": 5},
            ],
        },
        tools=[ping],
    )
    outcome = rt.run("lead", "go", token_budget=350, wait=60)
    assert outcome.status is RunStatus.BUDGET_EXCEEDED
    assert outcome.error is not None and outcome.error.startswith("lead used ")
    workers = [r for r in rt.runs(root_run_id=outcome.run_id) if r.agent == "worker"]
    assert len(workers) == 3
    assert all(w.status.terminal for w in workers)
    assert {w.status for w in workers} <= {RunStatus.CANCELLED, RunStatus.BUDGET_EXCEEDED}
    assert all(w.status is RunStatus.CANCELLED for w in workers if w.token_budget is None)
    # the lead's own second turn never ran
    assert [r.agent for r in model.requests].count("lead") == 1
    # usage by the stop: 10 + 4 worker calls of 100 at most (one per worker in flight)
    assert rt.totals(outcome.run_id).tokens <= 10 + 3 * 100 + 100


def test_cost_budget_from_the_definition(make_runtime: Any) -> None:
    turn = {"tool_calls": [{"name": "ping", "input": {}}], "usage": usage(1, 1, 0.02)}
    rt, _model, _events = make_runtime(
        [spec("lead", metadata={"costBudget": 0.05})], {"lead": [turn] * 5}, tools=[ping]
    )
    outcome = rt.run("lead", "go", wait=60)
    assert outcome.status is RunStatus.BUDGET_EXCEEDED
    assert outcome.error == "lead used $0.0600 of its $0.0500 cost budget"
    assert rt.get(outcome.run_id).cost_budget_usd == 0.05


def test_a_restored_run_keeps_its_budget(tmp_path: Any) -> None:
    from subagents.messages import (
        ChatMessage,
        Checkpoint,
        RunRecord,
        TextBlock,
        ToolResultBlock,
        ToolUseBlock,
    )
    from subagents.runtime import Runtime
    from subagents.store.sqlite import SQLiteStore

    path = tmp_path / "runs.db"
    store = SQLiteStore(path)
    use = ToolUseBlock(id="toolu_1", name="check_mailbox", input={})
    with store.batch():
        store.save_run(
            RunRecord(
                run_id="r1",
                agent="lead",
                task="go",
                root_run_id="r1",
                status=RunStatus.RUNNING,
                steps=1,
                usage=Usage(input_tokens=90, model_calls=1),
                token_budget=100,
            )
        )
        store.save_checkpoint(
            Checkpoint(
                run_id="r1",
                step=1,
                messages=(
                    ChatMessage("user", (TextBlock("go"),)),
                    ChatMessage("assistant", (TextBlock("thinking"), use)),
                ),
                answered=(ToolResultBlock("toolu_1", "no new mail"),),
            )
        )
    store.close()
    model = ShownModel({"lead": ["unused", {"text": "more", "usage": usage(20, 10)}, "never"]})
    reopened = SQLiteStore(path)
    with Runtime([spec("lead")], model=model, store=reopened) as rt:
        outcome = rt.attach("r1").result(60)
    reopened.close()
    assert outcome.status is RunStatus.BUDGET_EXCEEDED
    assert outcome.error == "lead used 120 tokens of its 100-token budget"
    assert len(model.requests) == 1
