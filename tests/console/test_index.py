"""The console's runs in memory (console/index.py), without a server: the tree's order, the
filters, the pages and what a change does to a filtered page."""

from __future__ import annotations

import pytest

from subagents.console.index import BadFilter, RunFilter, RunIndex
from subagents.messages import RunRecord, RunStatus, Usage


def record(run_id: str, parent: RunRecord | None = None, **fields: object) -> RunRecord:
    defaults: dict[str, object] = {
        "agent": "worker",
        "task": f"task of {run_id}",
        "created_at": float(len(run_id)) + ord(run_id[-1]) / 1000,
    }
    defaults.update(fields)
    return RunRecord(
        run_id=run_id,
        root_run_id=parent.root_run_id if parent else run_id,
        parent_run_id=parent.run_id if parent else None,
        depth=parent.depth + 1 if parent else 0,
        **defaults,  # type: ignore[arg-type]
    )


def filled(*records: RunRecord) -> RunIndex:
    index = RunIndex()
    for r in records:
        index.put(r, str(r.status))
    return index


def test_a_page_is_the_newest_trees_first_each_depth_first() -> None:
    old = record("a", created_at=1.0)
    old_child = record("a1", old, created_at=2.0)
    new = record("b", created_at=3.0)
    new_first = record("b1", new, created_at=4.0)
    new_second = record("b2", new, created_at=6.0)
    grandchild = record("b11", new_first, created_at=5.0)
    # put in no particular order: a child before another's, a grandchild before its uncle
    index = filled(old, new, new_second, new_first, grandchild, old_child)
    page = index.page(RunFilter())
    assert [r.id for r in page.rows] == ["b", "b1", "b11", "b2", "a", "a1"]
    assert page.more is None and page.total == 6
    assert {r.root_created for r in page.rows if r.root == "b"} == {3.0}


def test_pages_go_back_tree_by_tree_with_a_cursor() -> None:
    roots = [record(f"r{i}", created_at=float(i)) for i in range(5)]
    index = filled(*roots)
    first = index.page(RunFilter(), trees=2)
    assert [r.id for r in first.rows] == ["r4", "r3"]
    second = index.page(RunFilter(), before=first.more, trees=2)
    assert [r.id for r in second.rows] == ["r2", "r1"]
    last = index.page(RunFilter(), before=second.more, trees=2)
    assert [r.id for r in last.rows] == ["r0"] and last.more is None


def test_a_big_tree_is_cut_and_says_how_many_were_left_out() -> None:
    root = record("r", created_at=0.0)
    children = [record(f"r{i:02}", root, created_at=float(i + 1)) for i in range(10)]
    page = filled(root, *children).page(RunFilter(), per_tree=4)
    assert [r.id for r in page.rows] == ["r", "r00", "r01", "r02"]
    assert page.cut == {"r": 7}


def test_filters_keep_status_agent_label_and_requester() -> None:
    root = record("root", created_at=0.0, agent="lead", status=RunStatus.WAITING)
    done = record("done1", root, agent="worker", label="x", status=RunStatus.COMPLETED)
    failed = record("fail1", root, agent="critic", status=RunStatus.FAILED)
    below = record("below1", done, agent="worker", status=RunStatus.RUNNING)
    index = filled(root, done, failed, below)

    def ids(**params: str) -> list[str]:
        return [r.id for r in index.page(RunFilter.parse(params)).rows]

    assert ids(status="failed") == ["fail1"]
    assert ids(status="failed,completed") == ["done1", "fail1"]
    assert ids(status="live") == ["root", "below1"]
    assert ids(agent="worker") == ["done1", "below1"]
    assert ids(label="x") == ["done1"]
    assert ids(requester="root") == ["done1", "fail1"]
    assert ids(requester="outside") == ["root"]
    assert ids(requester="done1") == ["below1"]
    assert ids(agent="worker", status="running") == ["below1"]
    assert ids(agent="nobody") == []


def test_a_status_that_is_none_is_refused_naming_it() -> None:
    with pytest.raises(BadFilter, match="status finished: not a status"):
        RunFilter.parse({"status": "running,finished"})


def test_a_change_is_shown_or_taken_off_a_filtered_page() -> None:
    run = record("r1", status=RunStatus.RUNNING)
    index = filled(run)
    running = RunFilter.parse({"status": "running"})
    fields = {**_fields(run), "status": RunStatus.COMPLETED, "usage": Usage(output_tokens=7)}
    ended = index.put(RunRecord(**fields), "completed")  # type: ignore[arg-type]
    assert index.changed([ended], running) == ([], ["r1"])
    assert index.changed([ended], RunFilter()) == ([ended], [])
    assert index.rows["r1"].tokens == 7 and index.rows["r1"].status == "completed"


def test_the_task_a_row_carries_is_one_line_and_cut() -> None:
    row = filled(record("r1", task="first\nsecond  line " + "x" * 500)).rows["r1"]
    assert row.task.startswith("first second line x")
    assert len(row.task) == 200


def _fields(r: RunRecord) -> dict[str, object]:
    return {f: getattr(r, f) for f in r.__struct_fields__}
