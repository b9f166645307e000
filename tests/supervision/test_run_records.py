"""One record per run on the supervisor's side: the run table's ``RunState`` (its tree place
included) and the policy books' ``RunEntry`` (its policy, budget and restart window, in one
dict the three share).

What the change must keep: the ledgers answer as when each kept its own dicts (property
tests against books that keep their own), a restored run known first to the budget ledger
gets its policy when it fails, and a tree that ended leaves nothing of itself behind.
"""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from subagents.definitions.spec import AgentSpec
from subagents.messages import RunFinished, RunRecord, RunStatus, SpawnRequest, StepTaken, Usage
from subagents.supervision.budgets import BudgetBook, BudgetRefused
from subagents.supervision.limits import Limits
from subagents.supervision.policy_book import Again, PolicyBook
from subagents.supervision.policy_settings import policy_of
from subagents.supervision.restarts import RestartIntensity
from subagents.supervision.run_entry import RunEntry
from subagents.supervision.runs import RunState, RunTable
from subagents.supervision.tree import RunTree


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


TRANSIENT = AgentSpec(name="w", description="d", restart="transient", max_restarts=2)

# ---- the ledgers over one shared dict answer as ledgers of their own ------------------------

ids = st.sampled_from(["a", "b", "c", "d", "e"])
budget_ops = st.lists(
    st.one_of(
        st.tuples(
            st.just("grant"),
            ids,
            st.one_of(st.none(), ids),
            st.one_of(st.none(), st.integers(1, 50)),
            st.one_of(st.none(), st.sampled_from([0.5, 2.0])),
        ),
        st.tuples(st.just("charge"), ids, st.integers(0, 30), st.sampled_from([0.0, 0.3])),
        st.tuples(st.just("restore"), ids, st.one_of(st.none(), ids), st.integers(0, 40)),
        st.tuples(st.just("decide"), ids, st.sampled_from(["crash", "timeout"])),
        st.tuples(st.just("tick"), st.floats(0, 40)),
        st.tuples(st.just("forget"), ids),
    ),
    max_size=40,
)


def _apply(op: tuple[Any, ...], budgets: BudgetBook, restarts: RestartIntensity) -> Any:
    """One operation on the ledgers; what it answered (or the refusal it raised)."""
    kind = op[0]
    if kind in ("grant", "restore") and op[2] is not None and op[2] >= op[1]:
        op = (*op[:2], None, *op[3:])  # (a parent sorts before its child: no cycle)
    try:
        if kind == "grant":
            return budgets.grant(op[1], op[2], tokens=(op[3],), cost_usd=(op[4],))
        if kind == "charge":
            return budgets.charge(op[1], Usage(input_tokens=op[2], cost_usd=op[3]))
        if kind == "restore":
            budgets.restore(op[1], op[2], budgets.budget(op[1]), Usage(output_tokens=op[3]))
            return None
        if kind == "decide":
            decided = restarts.decide(op[1], policy_of(TRANSIENT), op[2])
            return (decided.restart, decided.attempt, decided.reason)
        if kind == "forget":
            budgets.forget([op[1]])
            restarts.forget(op[1])
            return None
    except BudgetRefused as exc:
        return ("refused", str(exc))
    return None


def _state(budgets: BudgetBook, restarts: RestartIntensity) -> list[Any]:
    policy = policy_of(TRANSIENT)
    return [
        (r, budgets.known(r), budgets.budget(r), budgets.spent(r), budgets.over(r)) for r in "abcde"
    ] + [restarts.in_window(r, policy) for r in "abcde"]


@settings(max_examples=100, deadline=None)
@given(budget_ops)
def test_the_ledgers_in_one_shared_dict_answer_as_ledgers_with_their_own(
    ops: list[tuple[Any, ...]],
) -> None:
    own_clock, shared_clock = Clock(), Clock()
    own_budgets = BudgetBook()
    own_restarts = RestartIntensity(clock=own_clock, rng=random.Random(3))
    entries: dict[str, RunEntry] = {}
    shared_budgets = BudgetBook(entries)
    shared_restarts = RestartIntensity(clock=shared_clock, rng=random.Random(3), entries=entries)
    for op in ops:
        if op[0] == "tick":
            own_clock.now += op[1]
            shared_clock.now += op[1]
            continue
        assert _apply(op, own_budgets, own_restarts) == _apply(
            op, shared_budgets, shared_restarts
        ), op
        assert _state(own_budgets, own_restarts) == _state(shared_budgets, shared_restarts), op


@settings(max_examples=100, deadline=None)
@given(budget_ops)
def test_the_ledgers_in_one_shared_dict_keep_what_each_operation_promises(
    ops: list[tuple[Any, ...]],
) -> None:
    """The same operations on the policy book's shared ledgers, each checked against what it
    promises, not against the same code over a dict of its own (a fault of both would pass
    the test above): a grant or restore registers the run (a restore with what it spent, a
    grant keeping it), a charge adds to the run and every ancestor known above it and to
    no other, a forget leaves nothing, a restart decided counts once in the window."""
    clock = Clock()
    entries: dict[str, RunEntry] = {}
    budgets = BudgetBook(entries)
    restarts = RestartIntensity(clock=clock, rng=random.Random(3), entries=entries)
    policy = policy_of(TRANSIENT)
    parent: dict[str, str | None] = {}
    for op in ops:
        if op[0] == "tick":
            clock.now += op[1]
            continue
        run_id = op[1]
        spent = {r: budgets.spent(r) for r in "abcde"}
        known = {r: budgets.known(r) for r in "abcde"}
        window = restarts.in_window(run_id, policy)
        answer = _apply(op, budgets, restarts)
        if op[0] in ("grant", "restore") and not isinstance(answer, tuple):
            above = op[2] if op[2] is not None and op[2] < run_id else None
            parent[run_id] = above
            assert budgets.known(run_id), op
            if op[0] == "restore":
                assert budgets.spent(run_id) == Usage(output_tokens=op[3]), op
            else:
                assert budgets.spent(run_id) == (spent[run_id] if known[run_id] else Usage())
        elif op[0] == "charge":
            usage = Usage(input_tokens=op[2], cost_usd=op[3])
            chain: list[str] = []
            current: str | None = run_id
            while current is not None and known[current]:
                chain.append(current)
                current = parent.get(current)
            for r in "abcde":
                assert budgets.spent(r) == (spent[r] + usage if r in chain else spent[r]), op
            assert answer == [r for r in chain if budgets.over(r)], op
        elif op[0] == "forget":
            assert not budgets.known(run_id) and restarts.in_window(run_id, policy) == 0, op
        elif op[0] == "decide":
            assert restarts.in_window(run_id, policy) == window + (1 if answer[0] else 0), op


# ---- the tree read from the runs' records answers as a tree of its own links ---------------

shapes = st.lists(st.integers(0, 30), min_size=1, max_size=25)


def _record(run_id: str, parent: RunRecord | None) -> RunRecord:
    return RunRecord(
        run_id=run_id,
        agent="w",
        task="t",
        root_run_id=parent.root_run_id if parent is not None else run_id,
        parent_run_id=parent.run_id if parent is not None else None,
        depth=parent.depth + 1 if parent is not None else 0,
    )


@settings(max_examples=60, deadline=None)
@given(shapes, st.data())
def test_the_tree_of_a_run_table_answers_as_a_tree_of_its_own_links(
    parents: list[int], data: st.DataObject
) -> None:
    """Runs added (each under an earlier one, or a root: ``parents[i] >= i``), then whole
    trees forgotten as ``RunTable.prune`` forgets them: every question asked of both trees
    gets the same answer, and the table's tree forgets what the table forgot."""
    table, own = RunTable(), RunTree()
    records: dict[str, RunRecord] = {}
    for i, p in enumerate(parents):
        parent = records[f"r{p}"] if p < i else None
        record = records[f"r{i}"] = _record(f"r{i}", parent)
        table.add(RunState(record=record, spec=TRANSIENT, request_id=None))
        own.add(record.run_id, record.parent_run_id)
    roots = [r for r, rec in records.items() if rec.parent_run_id is None]
    for root in data.draw(st.lists(st.sampled_from(roots), unique=True)):
        tree_ids = own.subtree(root)
        for r in tree_ids:
            state = table.get(r)
            assert state is not None
            table.fire_ended(state, RunStatus.COMPLETED, 1.0, None)  # type: ignore[arg-type]
            table.ended(state)
        own.forget(tree_ids)
        assert set(table.prune()) == set(tree_ids)  # (a root ended twice is named twice)
    for r in records:
        assert (r in table.tree) == (r in own) == (r in table)
        if r not in own:
            continue
        assert table.tree.parent(r) == own.parent(r)
        assert table.tree.root(r) == own.root(r)
        assert table.tree.children(r) == own.children(r)
        assert table.tree.ancestors(r) == own.ancestors(r)
        assert table.tree.subtree(r) == own.subtree(r)
        assert table.tree.deepest_first(r) == own.deepest_first(r)
        assert table.tree.has_children(r) == own.has_children(r) == (r in table.tree.parents)


# ---- the policy books -----------------------------------------------------------------------


def test_a_restored_run_the_budget_ledger_knew_first_gets_its_policy_when_it_fails() -> None:
    """A run restored from the store (not admitted by this book) is put in the budget
    ledger by its first step: its entry has a budget and no policy yet. When it then fails
    abnormally, its policy is read from its definition (``PolicyBook.entry``) and it is
    restarted as its ``transient`` definition says."""
    runs = RunTable()
    book = PolicyBook(runs, Limits(), Clock(), random.Random(1))
    record = RunRecord(run_id="r", agent="w", task="t", root_run_id="r", status=RunStatus.RUNNING)
    state = RunState(record=record, spec=TRANSIENT, request_id=None)
    runs.add(state)
    assert book.charge(StepTaken(run_id="r", step=1, usage=Usage(input_tokens=3))) == []
    assert book.budgets.known("r") and "r" in book.held()
    again = book.again(state, RunFinished(run_id="r", error_kind="crash", error="boom"))
    assert isinstance(again, Again) and not again.retry and again.attempt == 1
    assert book.restarting("r")


def test_a_tree_that_ended_leaves_nothing_behind_in_the_books() -> None:
    """A root and two children admitted through the book (budgets, a restart decided for
    one), then the tree ends: ``RunTable.prune`` forgets every run, and the book's one
    ``forget`` every entry: the budget, the policy and the restart window go together."""
    runs = RunTable()
    book = PolicyBook(runs, Limits(), Clock(), random.Random(1))
    root_rec = RunRecord(run_id="root", agent="w", task="t", root_run_id="root", token_budget=90)
    spec = TRANSIENT
    fields = book.admit(
        SpawnRequest(request_id="q", agent="w", task="t", token_budget=90), spec, None, "root"
    )
    assert fields.token_budget == 90
    root = RunState(record=root_rec, spec=spec, request_id=None)
    runs.add(root)
    for child in ("c1", "c2"):
        req = SpawnRequest(
            request_id=child, agent="w", task="t", parent_run_id="root", token_budget=50
        )
        assert book.admit(req, spec, root, child).token_budget == 50
        rec = _record(child, root_rec)
        runs.add(RunState(record=rec, spec=spec, request_id=None))
    assert book.charge(StepTaken(run_id="c1", step=1, usage=Usage(input_tokens=60))) == ["c1"]
    assert book.budgets.spent("root").input_tokens == 60  # rolled up to the parent
    assert book.restarts.decide("c2", policy_of(spec), "crash").restart
    assert set(book.held()) == {"root", "c1", "c2"}
    for run_id in ("c1", "c2", "root"):
        state = runs.get(run_id)
        assert state is not None
        runs.fire_ended(state, RunStatus.COMPLETED, 1.0, None)  # type: ignore[arg-type]
        runs.ended(state)
    forgotten = runs.prune()
    book.forget(forgotten)
    assert sorted(forgotten) == ["c1", "c2", "root"]
    assert not set(book.held()) and not set(runs.held()) and not set(runs.tree.parents)
    assert book.restarts.in_window("c2", policy_of(spec)) == 0
    assert not book.budgets.known("root")
